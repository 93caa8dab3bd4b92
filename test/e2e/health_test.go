// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

const unhealthyTaint = "gpu.nvidia.com/unhealthy"

// gpuUUID reads a published GPU's UUID from the node's ResourceSlices.
func gpuUUID(t *testing.T, device string) string {
	t.Helper()
	d, ok := sliceDevice(t, device)
	if !ok || d.Attributes["uuid"].StringValue == nil {
		t.Fatalf("device %s not published", device)
	}
	return *d.Attributes["uuid"].StringValue
}

func sliceDevice(t *testing.T, device string) (resourceapi.Device, bool) {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: node1Slices()})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			if d.Name == device {
				return d, true
			}
		}
	}
	return resourceapi.Device{}, false
}

// taintOf is the device's unhealthy taint as "value/effect", "" if none.
func taintOf(t *testing.T, device string) string {
	d, _ := sliceDevice(t, device)
	return taintText(d)
}

func taintText(d resourceapi.Device) string {
	for _, taint := range d.Taints {
		if taint.Key == unhealthyTaint {
			return taint.Value + "/" + string(taint.Effect)
		}
	}
	return ""
}

// injectFault writes the simulator's fault file for a GPU (the plugin's
// state dir is a host path); an empty spec removes it.
func injectFault(t *testing.T, uuid, spec string) {
	t.Helper()
	path := filepath.Join(stateDir(), "simulated", "faults", uuid+".xid")
	if spec == "" {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(spec+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// podOnGPU creates a pod whose claim can only be satisfied by GPU minor.
func podOnGPU(t *testing.T, name string, minor int) {
	t.Helper()
	applyYAML(t, gpuTemplate(fmt.Sprintf("gpu-%d-only", minor), ns, fmt.Sprintf("device.attributes['gpu.nvidia.com'].minor == %d", minor))+fmt.Sprintf(`---
apiVersion: v1
kind: Pod
metadata: {name: %[1]s, namespace: gpu-demo}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-%[2]d-only}]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [{name: gpu}]}}]
`, name, minor))
}

// allocatedHealth is what the kubelet shows for a pod's DRA devices:
// status.containerStatuses[].allocatedResourcesStatus.
func allocatedHealth(p *corev1.Pod) string {
	var out []string
	for _, cs := range p.Status.ContainerStatuses {
		for _, rs := range cs.AllocatedResourcesStatus {
			for _, r := range rs.Resources {
				out = append(out, fmt.Sprintf("%s=%s", r.ResourceID, r.Health))
			}
		}
	}
	return strings.Join(out, ",")
}

// claimCondition is the Healthy condition of the pod's claim's first device.
func claimCondition(t *testing.T, p *corev1.Pod) string {
	if len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		return "no claim"
	}
	c, err := client.ResourceV1().ResourceClaims(ns).Get(context.Background(), *p.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil || len(c.Status.Devices) == 0 {
		return fmt.Sprint("no device status: ", err)
	}
	for _, cond := range c.Status.Devices[0].Conditions {
		if cond.Type == "Healthy" {
			return fmt.Sprintf("%s/%s: %s", cond.Status, cond.Reason, cond.Message)
		}
	}
	return "no Healthy condition"
}

func TestHealthXID(t *testing.T) {
	apply(t, "00-namespace.yaml")
	const minor = 2
	device := fmt.Sprintf("gpu-%d", minor)
	uuid := gpuUUID(t, device)
	t.Cleanup(func() { injectFault(t, uuid, ""); deletePods(t, "health-running", "health-pending") })

	podOnGPU(t, "health-running", minor)
	waitRunning(t, "health-running")
	waitFor(t, "the kubelet to show the device healthy", 60*time.Second, func() (bool, string) {
		h := allocatedHealth(pod(t, "health-running"))
		return strings.Contains(h, "=Healthy"), h
	})

	// An application XID changes nothing.
	injectFault(t, uuid, "13")
	time.Sleep(6 * time.Second) // more than a poll of the plugin
	if taint := taintOf(t, device); taint != "" {
		t.Fatalf("XID 13 (an application error) tainted %s: %s", device, taint)
	}
	if h := allocatedHealth(pod(t, "health-running")); strings.Contains(h, "Unhealthy") {
		t.Fatalf("XID 13 made the pod's device unhealthy: %s", h)
	}

	injectFault(t, uuid, "79")
	start := time.Now()
	waitFor(t, "the taint", 10*time.Second, func() (bool, string) {
		taint := taintOf(t, device)
		return taint == "xid-79/NoSchedule", taint
	})
	t.Logf("XID 79 to taint in the slice: %v", time.Since(start).Round(time.Millisecond))
	waitFor(t, "the running pod to show its device Unhealthy", 60*time.Second, func() (bool, string) {
		h := allocatedHealth(pod(t, "health-running"))
		return strings.Contains(h, "=Unhealthy"), h
	})
	waitFor(t, "the claim's device condition", 30*time.Second, func() (bool, string) {
		c := claimCondition(t, pod(t, "health-running"))
		return strings.HasPrefix(c, "False/Xid79: XID 79"), c
	})

	// The tainted GPU is the only one this pod fits: it stays Pending.
	deletePods(t, "health-running")
	podOnGPU(t, "health-pending", minor)
	pendingSince := time.Now()
	waitFor(t, "a FailedScheduling event", 60*time.Second, func() (bool, string) {
		ev := events(t, "Pod", "health-pending")
		return strings.Contains(ev, "FailedScheduling") && strings.Contains(ev, "cannot allocate all claims"), ev
	})
	// The scheduler's event cannot name the taint (Kubernetes 1.37 says
	// only "cannot allocate all claims"); the webhook Deployment's pending
	// explainer adds one that does.
	waitFor(t, "an event naming the taint", 60*time.Second, func() (bool, string) {
		ev := events(t, "Pod", "health-pending")
		return strings.Contains(ev, "Warning DeviceTaintsBlockScheduling") &&
			strings.Contains(ev, "/"+device+" (gpu.nvidia.com/unhealthy=xid-79:NoSchedule)"), ev
	})
	t.Logf("pod created to an event naming the taint: %v", time.Since(pendingSince).Round(time.Millisecond))
	if p := pod(t, "health-pending"); p.Spec.NodeName != "" {
		t.Fatalf("pod bound to %s while its only GPU is tainted", p.Spec.NodeName)
	}
	if ev := nodeEvents(t, "GPUUnhealthy"); !strings.Contains(ev, uuid) || !strings.Contains(ev, "XID 79") {
		t.Fatalf("no GPUUnhealthy Node event for %s: %s", uuid, ev)
	}

	// Recovery: the fault goes, so do the taint, and the pod starts.
	injectFault(t, uuid, "")
	waitFor(t, "the taint to go", 30*time.Second, func() (bool, string) {
		taint := taintOf(t, device)
		return taint == "", taint
	})
	waitRunning(t, "health-pending")
	waitFor(t, "a GPURecovered Node event", 30*time.Second, func() (bool, string) {
		ev := nodeEvents(t, "GPURecovered")
		return strings.Contains(ev, uuid), ev
	})
}

func nodeEvents(t *testing.T, reason string) string {
	t.Helper()
	list, err := client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=" + reason})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.Message)
	}
	return strings.Join(out, "\n")
}

// TestHealthNoExecute redeploys the chart with health.taintEffect=NoExecute:
// the pod using the GPU is evicted by the device-taint eviction controller.
func TestHealthNoExecute(t *testing.T) {
	apply(t, "00-namespace.yaml")
	setTaintEffect(t, "NoExecute")
	t.Cleanup(func() { setTaintEffect(t, "NoSchedule") })
	const minor = 3
	device := fmt.Sprintf("gpu-%d", minor)
	uuid := gpuUUID(t, device)
	t.Cleanup(func() { injectFault(t, uuid, ""); deletePods(t, "health-evicted") })
	podOnGPU(t, "health-evicted", minor)
	waitRunning(t, "health-evicted")
	injectFault(t, uuid, "ecc-dbe")
	waitFor(t, "the NoExecute taint", 10*time.Second, func() (bool, string) {
		taint := taintOf(t, device)
		return taint == "ecc-dbe/NoExecute", taint
	})
	waitFor(t, "the pod to be evicted", 60*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), "health-evicted", metav1.GetOptions{})
		if err != nil {
			return true, "deleted"
		}
		return p.DeletionTimestamp != nil, string(p.Status.Phase)
	})
	injectFault(t, uuid, "")
	waitFor(t, "the taint to go", 30*time.Second, func() (bool, string) {
		taint := taintOf(t, device)
		return taint == "", taint
	})
}

// setTaintEffect upgrades the release in place, keeping its other values,
// and waits for the plugin to publish again.
func setTaintEffect(t *testing.T, effect string) {
	t.Helper()
	cmd := exec.Command("helm", "upgrade", "gpu-dra-driver", filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver"),
		"--namespace", driverNS, "--reuse-values", "--set", "health.taintEffect="+effect, "--wait", "--timeout", "120s")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("helm upgrade to %s: %v\n%s", effect, err, out)
	}
	waitPluginReady(t, "the plugin with --health-taint-effect="+effect, func(p corev1.Pod) bool {
		return len(p.Spec.Containers) > 0 && slices.Contains(p.Spec.Containers[0].Args, "--health-taint-effect="+effect)
	})
}

// TestHealthTaintLatency measures fault injection to taint in the slice,
// as the scheduler sees it (a watch on ResourceSlices), five times.
func TestHealthTaintLatency(t *testing.T) {
	const device = "gpu-4"
	uuid := gpuUUID(t, device)
	t.Cleanup(func() { injectFault(t, uuid, "") })
	waitPluginReady(t, "a Ready plugin", func(corev1.Pod) bool { return true })
	var took []time.Duration
	for range 5 {
		w, err := client.ResourceV1().ResourceSlices().Watch(context.Background(), metav1.ListOptions{FieldSelector: node1Slices()})
		if err != nil {
			t.Fatal(err)
		}
		injectFault(t, uuid, "79")
		start := time.Now()
		if !waitWatch(w, device, "xid-79/NoSchedule", 30*time.Second) {
			t.Fatal("no taint within 30s")
		}
		took = append(took, time.Since(start))
		w.Stop()
		injectFault(t, uuid, "")
		waitFor(t, "the taint to go", 30*time.Second, func() (bool, string) {
			taint := taintOf(t, device)
			return taint == "", taint
		})
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	t.Logf("fault injection to taint in the ResourceSlice: median %v of %v", sorted[len(sorted)/2].Round(time.Millisecond), took)
	// The plugin's share: from the event to the slices handed to the
	// resourceslice controller.
	out, _ := exec.Command("kubectl", "logs", "-n", driverNS, "-l", pluginLabel, "--tail=-1").CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "GPU fault") || strings.Contains(line, "Published device health") {
			t.Log(line)
		}
	}
}

func waitWatch(w watch.Interface, device, want string, timeout time.Duration) bool {
	deadline := time.After(timeout)
	for {
		select {
		case <-deadline:
			return false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false
			}
			s, isSlice := ev.Object.(*resourceapi.ResourceSlice)
			if !isSlice {
				continue
			}
			for _, d := range s.Spec.Devices {
				if d.Name == device && taintText(d) == want {
					return true
				}
			}
		}
	}
}
