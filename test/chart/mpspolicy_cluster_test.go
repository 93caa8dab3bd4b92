// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// daemonPod is the pod the plugin deployed with set creates on ownNode, as
// a policy sees it on a cluster without a default PriorityClass.
func daemonPod(t *testing.T, set ...string) (pod *corev1.Pod, pluginDir string) {
	t.Helper()
	pod, pluginDir = daemonPodOn(t, ownNode, set...)
	if err := mutateAsAPIServer(t, pod, plainCluster); err != nil {
		t.Fatalf("the API server refuses the daemon pod: %v", err)
	}
	return pod, pluginDir
}

// daemonPodOn is the pod the plugin deployed with set would create on node,
// as it sends it: pkg/sharing PodRunner.Pod with the image, driver root,
// state directory and priority class the rendered DaemonSet gives the
// plugin. mutateAsAPIServer turns it into what a policy sees.
func daemonPodOn(t *testing.T, node string, set ...string) (pod *corev1.Pod, pluginDir string) {
	t.Helper()
	c := plugin(t, render(t, append([]string{"driverName=" + testDriver}, set...)...))
	r := &sharing.PodRunner{Namespace: "gpu-dra-driver", NodeName: node}
	kubeletDir := ""
	for _, e := range c.Env {
		if e.Name == "MPS_DAEMON_IMAGE" {
			r.Image = e.Value
		}
	}
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--host-driver-root="); ok {
			r.HostDriverRoot = v
			r.DaemonDefaults = strings.Contains(strings.Join(set, ","), "simulate.nodeMode=devices")
		}
		if v, ok := strings.CutPrefix(a, "--kubelet-dir="); ok {
			kubeletDir = v
		}
		if v, ok := strings.CutPrefix(a, "--mps-priority-class-name="); ok {
			r.PriorityClassName = v
		}
	}
	if r.Image == "" || kubeletDir == "" {
		t.Fatalf("plugin container has no MPS_DAEMON_IMAGE or --kubelet-dir: %v %v", c.Env, c.Args)
	}
	// cmd/gpu-kubelet-plugin: the state directory, and MPS under it.
	pluginDir = filepath.Join(kubeletDir, "plugins", testDriver)
	uuid := "GPU-00000000-0000-0000-0000-0000000000a1"
	pod = r.Pod(&sharing.Daemon{DeviceUUID: uuid, Dir: filepath.Join(pluginDir, "mps", uuid), Defaults: sharing.Settings{ActiveThreadPercentage: 50}})
	return pod, pluginDir
}

// Issue 55, defect 1: on a cluster with a globalDefault PriorityClass,
// Priority admission gave the plugin's daemon pod that class before the
// policy looked, and the policy refused every daemon pod. The daemon pod,
// as the API server hands it to the policy, is admitted on every cluster,
// in every node mode; what the pod would be with another class is not.
func TestChartMPSPolicyAdmitsTheDaemonPodOnEveryCluster(t *testing.T) {
	for _, m := range policyModes {
		policy := mpsPolicy(t, m.set...)
		for _, c := range apiServerClusters {
			t.Run(m.name+"/"+c.name, func(t *testing.T) {
				pod, _ := daemonPodOn(t, ownNode, m.set...)
				if err := mutateAsAPIServer(t, pod, c); err != nil {
					t.Fatalf("the API server refuses the daemon pod: %v", err)
				}
				matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: pod})
				if !matched || len(denials) > 0 {
					t.Errorf("the daemon pod with priorityClassName %q: matched %v, denied: %s", pod.Spec.PriorityClassName, matched, strings.Join(denials, "; "))
				}
			})
		}
	}
}

// What the priority fields can be, on each cluster: only the chart's class,
// with its value. A pod that names no class gets the default one; one that
// names another class (a higher one, to resist eviction, or a lower one)
// is refused; and a priority that is not the class's is refused too, in
// case Priority admission is off.
func TestChartMPSPolicyRefusesAnotherPriority(t *testing.T) {
	policy := mpsPolicy(t)
	for _, c := range apiServerClusters {
		t.Run(c.name, func(t *testing.T) {
			for _, a := range []struct {
				name   string
				mutate func(p *corev1.Pod)
				// mutateAfter: changed after the API server's mutation, as
				// with Priority admission off.
				after bool
			}{
				{name: "NoClass", mutate: func(p *corev1.Pod) { p.Spec.PriorityClassName = "" }},
				{name: "ClusterCritical", mutate: func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }},
				{name: "PriorityWithoutAdmission", after: true, mutate: func(p *corev1.Pod) { p.Spec.Priority = ptr.To[int32](2000001001) }},
				{name: "NeverPreemptsWithoutAdmission", after: true, mutate: func(p *corev1.Pod) { p.Spec.PreemptionPolicy = ptr.To(corev1.PreemptNever) }},
			} {
				pod, _ := daemonPodOn(t, ownNode)
				if !a.after {
					a.mutate(pod)
				}
				if err := mutateAsAPIServer(t, pod, c); err != nil {
					continue // the API server refuses it itself
				}
				if a.after {
					a.mutate(pod)
				}
				matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: pod})
				if !matched || len(denials) == 0 {
					t.Errorf("%s: admitted with priorityClassName %q, priority %v", a.name, pod.Spec.PriorityClassName, *pod.Spec.Priority)
				}
			}
		})
	}
}

// A cluster's admin may give daemon pods a class of the cluster's own
// (sharing.mps.priorityClassName): the policy then wants exactly that name,
// and Priority admission ties its value to it.
func TestChartMPSPolicyWithTheAdminsClass(t *testing.T) {
	set := []string{"sharing.mps.priorityClassName=gpu-node-daemons"}
	policy := mpsPolicy(t, set...)
	c := productionCluster
	c.classes = append(withClasses(schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu-node-daemons"}, Value: 100000}), c.classes...)
	pod, _ := daemonPodOn(t, ownNode, set...)
	if pod.Spec.PriorityClassName != "gpu-node-daemons" {
		t.Fatalf("the plugin gives daemon pods priorityClassName %q, want the chart's gpu-node-daemons", pod.Spec.PriorityClassName)
	}
	if err := mutateAsAPIServer(t, pod, c); err != nil {
		t.Fatal(err)
	}
	if matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: pod}); !matched || len(denials) > 0 {
		t.Errorf("the daemon pod with the chart's class: matched %v, denied: %s", matched, strings.Join(denials, "; "))
	}
	other, _ := daemonPodOn(t, ownNode, set...)
	other.Spec.PriorityClassName = "system-node-critical"
	if err := mutateAsAPIServer(t, other, c); err != nil {
		t.Fatal(err)
	}
	matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: other})
	requireDenied(t, "another class than the chart's", matched, denials, "spec.priorityClassName")
}

// Issue 55, defect 4: node-b's token created, on node-b, a pod with
// node-a's daemon pod name and node label; node-a's plugin took it for its
// own daemon and could not delete it. A daemon pod's name names the node
// of the token that creates it, and its labels carry no node claim that
// the policy cannot check.
func TestChartMPSPolicyBindsTheDaemonToItsTokensNode(t *testing.T) {
	for _, m := range policyModes {
		t.Run(m.name, func(t *testing.T) {
			policy := mpsPolicy(t, m.set...)
			ofA, _ := daemonPodOn(t, ownNode, m.set...)
			create := func(what string, p *corev1.Pod) []string {
				if err := mutateAsAPIServer(t, p, plainCluster); err != nil {
					t.Fatal(err)
				}
				matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: otherNode, object: p})
				if !matched {
					t.Fatalf("%s: the policy did not match", what)
				}
				return denials
			}
			ofB, _ := daemonPodOn(t, otherNode, m.set...)
			if d := create("node-b's own daemon pod", ofB.DeepCopy()); len(d) > 0 {
				t.Fatalf("node-b's own daemon pod: denied: %s", strings.Join(d, "; "))
			}
			squat := ofB.DeepCopy()
			squat.Name = ofA.Name
			requireDenied(t, "node-b's pod with node-a's daemon name", true, create("squat", squat), "metadata.name must be gpu-mps-node-b-")
			// The label an earlier version gave node-a's daemons.
			labelled := ofB.DeepCopy()
			labelled.Labels["gpu.nvidia.com/mps-node"] = "9f2c0d4e1b7a3c55"
			requireDenied(t, "node-b's pod with a node label", true, create("label", labelled), "metadata.labels exactly")
			// The shape of an earlier version's name, which bound no node.
			legacy := ofB.DeepCopy()
			legacy.Name = "gpu-mps-0123456789abcdef"
			requireDenied(t, "node-b's pod with a name without its node", true, create("legacy", legacy), "metadata.name must be")
			// A name that starts with node-b but names another node.
			longer := ofB.DeepCopy()
			longer.Name = "gpu-mps-node-b-x-0123456789abcdef"
			requireDenied(t, "a name of node node-b-x", true, create("longer", longer), "metadata.name must be")
		})
	}
}
