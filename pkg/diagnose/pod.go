// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// DiagnosePod explains a pod's GPUs: why it is Pending, why it is stuck
// after scheduling, or which devices its containers got. Up to scheduling
// the verdict is clusterview's (AnalyzePod); after it, the plugin's and the
// containers' are told here.
func DiagnosePod(s *clusterview.Snapshot, namespace, name string) *Report {
	r := &Report{Target: "pod " + namespace + "/" + name, Unreadable: s.Unreadable}
	pod := s.Pod(namespace, name)
	if pod == nil {
		r.Status, r.Verdict = Unknown, fmt.Sprintf("pod %s/%s not found", namespace, name)
		return r
	}
	a := clusterview.AnalyzePod(s, pod)
	r.IncompletePools = a.IncompletePools
	r.Pod = podInfo(s, pod)
	r.Claims = a.Claims
	if v, decided := a.Verdict(); decided {
		r.Status, r.Verdict, r.Pod.Nodes = v.Status, v.Verdict, v.Nodes
		return r
	}
	switch {
	case pod.Status.Phase == corev1.PodRunning:
		runningVerdict(r, pod)
	default:
		prepareVerdict(r, s, pod)
	}
	return r
}

func podInfo(s *clusterview.Snapshot, pod *corev1.Pod) *PodInfo {
	info := &PodInfo{Phase: string(pod.Status.Phase), Node: pod.Spec.NodeName, Scheduler: s.SchedulerMessage(pod)}
	states := map[string]string{}
	for _, st := range pod.Status.ContainerStatuses {
		switch {
		case st.State.Running != nil:
			states[st.Name] = "Running"
		case st.State.Waiting != nil:
			states[st.Name] = "Waiting: " + st.State.Waiting.Reason
		case st.State.Terminated != nil:
			states[st.Name] = "Terminated: " + st.State.Terminated.Reason
		}
	}
	for _, ctr := range pod.Spec.Containers {
		ci := ContainerInfo{Name: ctr.Name, State: states[ctr.Name]}
		if ci.State == "" {
			ci.State = "not started"
		}
		for _, rc := range ctr.Resources.Claims {
			n := rc.Name
			if rc.Request != "" {
				n += "/" + rc.Request
			}
			ci.Claims = append(ci.Claims, n)
		}
		for res := range ctr.Resources.Limits {
			if clusterview.ExtendedResourceClass(s, string(res)) != "" {
				ci.Claims = append(ci.Claims, string(res))
			}
		}
		info.Containers = append(info.Containers, ci)
	}
	return info
}

// runningVerdict names the devices of a running pod, and flags containers
// that list no claim: CDI injects a claim's devices only into containers
// that list it.
func runningVerdict(r *Report, pod *corev1.Pod) {
	var devs []string
	for _, cr := range r.Claims {
		devs = append(devs, fmt.Sprintf("%s from claim %s", strings.Join(cr.Devices, ", "), cr.Name))
	}
	var without []string
	for _, ci := range r.Pod.Containers {
		if len(ci.Claims) == 0 {
			without = append(without, ci.Name)
		}
	}
	if len(without) == len(r.Pod.Containers) {
		r.Status = Blocked
		r.Verdict = fmt.Sprintf("pod %s has claims (%s) but none of its containers lists one in resources.claims, so no container gets a GPU; add resources.claims: [{name: <pod claim name>}] to the containers that need it", pod.Name, strings.Join(devs, "; "))
		return
	}
	r.Status = OK
	r.Verdict = fmt.Sprintf("pod %s is Running on node %s with %s", pod.Name, pod.Spec.NodeName, strings.Join(devs, "; "))
	if len(without) > 0 {
		r.Verdict += fmt.Sprintf("; containers %s list no claim and see no GPU", strings.Join(without, ", "))
	}
}
