// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
)

const (
	passthroughNS = "gpu-passthrough"
	// passthroughGPU is a dynamic-MIG GPU of deploy.sh's h100x8 node; its
	// address and IOMMU group are the simulator's (pkg/simulate).
	passthroughGPU   = 6
	passthroughAddr  = "0000:48:00.0"
	passthroughGroup = "46"
	passthroughFlag  = "--passthrough-gpus=6"
	vmCommand        = `ls -l /dev/vfio; env | grep ^PCI_RESOURCE; echo "nvidia-nodes: $(ls /dev | grep -c nvidia)"; echo e2e-ready; sleep 3600`
)

// setPassthrough upgrades the release in place and waits for a Ready
// plugin with (or without) --passthrough-gpus.
func setPassthrough(t *testing.T, on bool) {
	t.Helper()
	helm(t, "upgrade", "gpu-dra-driver", filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver"),
		"--namespace", driverNS, "--reuse-values", "--set", fmt.Sprintf("passthrough.enabled=%v", on),
		"--set", fmt.Sprintf("passthrough.gpus={%d}", passthroughGPU), "--wait", "--timeout", "120s")
	waitPluginReady(t, fmt.Sprintf("the plugin with passthrough.enabled=%v", on), func(p corev1.Pod) bool {
		return slices.Contains(p.Spec.Containers[0].Args, passthroughFlag) == on
	})
}

// bindState is what the simulated sysfs says of the GPU: its driver and
// whether /dev/vfio/<group> exists, as an operator would read them.
func bindState(t *testing.T) string {
	t.Helper()
	sim := filepath.Join(stateDir(), "simulated")
	drv := "(none)"
	if target, err := os.Readlink(filepath.Join(sim, "sys", "bus", "pci", "devices", passthroughAddr, "driver")); err == nil {
		drv = filepath.Base(target)
	}
	override, _ := os.ReadFile(filepath.Join(sim, "sys", "bus", "pci", "devices", passthroughAddr, "driver_override"))
	_, err := os.Stat(filepath.Join(sim, "dev", "vfio", passthroughGroup))
	return fmt.Sprintf("driver=%s driver_override=%s /dev/vfio/%s=%v", drv, strings.TrimSpace(string(override)), passthroughGroup, err == nil)
}

func waitBound(t *testing.T, what, driver string) string {
	t.Helper()
	var state string
	waitFor(t, what, 60*time.Second, func() (bool, string) {
		state = bindState(t)
		return strings.HasPrefix(state, "driver="+driver+" "), state
	})
	return state
}

func unscheduledFor(t *testing.T, name string, d time.Duration) {
	t.Helper()
	state := func() (bool, string) {
		p := podIn(t, passthroughNS, name)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c.Status == corev1.ConditionFalse && p.Spec.NodeName == "", fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
			}
		}
		return false, "no PodScheduled condition, phase " + string(p.Status.Phase)
	}
	waitFor(t, name+" PodScheduled=False", 60*time.Second, state)
	time.Sleep(d)
	ok, s := state()
	if !ok {
		t.Fatalf("%s scheduled while a VM has GPU %d: %s", name, passthroughGPU, s)
	}
	t.Logf("%s waits: PodScheduled=%s", name, s)
}

// TestPassthrough: with passthrough.gpus={6}, a pod whose claim asks for
// vfio.gpu.nvidia.com sees /dev/vfio/vfio and its group's node, the
// PCI_RESOURCE_ variable and the device metadata (pciBusID, iommuGroup),
// while the simulated sysfs shows the GPU on vfio-pci; a whole-GPU pod and
// a MIG pod for that GPU wait meanwhile. Once the VM pod goes, the GPU is
// back on nvidia and the whole-GPU pod gets it.
func TestPassthrough(t *testing.T) {
	requireCleanNode(t)
	setPassthrough(t, true)
	t.Cleanup(func() { setPassthrough(t, false) })
	testNamespace(t, passthroughNS)
	t.Logf("sysfs before: %s", waitBound(t, "GPU 6 on nvidia before", "nvidia"))

	vm := classTemplate("vm", passthroughNS, "vfio.gpu.nvidia.com", fmt.Sprintf("device.attributes['resource.kubernetes.io'].pciBusID == '%s'", passthroughAddr)) +
		"---\n" + strings.Replace(claimPod("vm", passthroughNS, "vm", "", map[string]string{"vm": ""}), fmt.Sprintf("%q", podCommand), fmt.Sprintf("%q", vmCommand), 1)
	applyYAML(t, vm)
	waitRunningIn(t, passthroughNS, "vm")
	var view string
	waitFor(t, "the vm pod's view", 30*time.Second, func() (bool, string) {
		b, err := exec.Command("kubectl", "logs", "-n", passthroughNS, "vm").CombinedOutput()
		view = string(b)
		return err == nil && strings.Contains(view, "e2e-ready"), view
	})
	t.Logf("vm pod (%s):\n%s", vmCommand, view)
	// The VM gets the VFIO nodes and the address, and no NVIDIA device.
	for _, want := range []string{"vfio\n", passthroughGroup + "\n", "PCI_RESOURCE_VFIO_GPU_NVIDIA_COM=" + passthroughAddr, "nvidia-nodes: 0"} {
		if !strings.Contains(view, want) {
			t.Errorf("the vm pod's view lacks %q", want)
		}
	}
	path := metadata.ResourceClaimTemplateFilePath(driverName, "gpu", "gpu")
	raw := kubectl(t, "-n", passthroughNS, "exec", "vm", "--", "cat", path)
	t.Logf("%s in vm:\n%s", path, raw)
	var dm metadata.DeviceMetadata
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(strings.NewReader(raw)), &dm); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if len(dm.Requests) != 1 || len(dm.Requests[0].Devices) != 1 {
		t.Fatalf("metadata %+v", dm)
	}
	attrs := dm.Requests[0].Devices[0].Attributes
	if a := attrs["resource.kubernetes.io/pciBusID"]; a.StringValue == nil || *a.StringValue != passthroughAddr {
		t.Errorf("metadata pciBusID %+v, want %s", a, passthroughAddr)
	}
	if a := attrs["iommuGroup"]; a.StringValue == nil || *a.StringValue != passthroughGroup {
		t.Errorf("metadata iommuGroup %+v, want %s", a, passthroughGroup)
	}
	t.Logf("sysfs during: %s", waitBound(t, "GPU 6 on vfio-pci", "vfio-pci"))

	// The GPU's other devices wait while the VM has it.
	applyYAML(t, gpuTemplate("whole", passthroughNS, fmt.Sprintf("device.attributes['gpu.nvidia.com'].minor == %d", passthroughGPU))+
		"---\n"+claimPod("whole", passthroughNS, "whole", "", map[string]string{"ctr": ""})+
		"---\n"+classTemplate("mig", passthroughNS, "mig.nvidia.com", fmt.Sprintf("device.attributes['gpu.nvidia.com'].parentMinor == %d", passthroughGPU))+
		"---\n"+claimPod("mig", passthroughNS, "mig", "", map[string]string{"ctr": ""}))
	unscheduledFor(t, "whole", 10*time.Second)
	unscheduledFor(t, "mig", 0)
	kubectl(t, "-n", passthroughNS, "delete", "pod", "mig", "--wait=true")

	kubectl(t, "-n", passthroughNS, "delete", "pod", "vm", "--wait=true")
	t.Logf("sysfs after: %s", waitBound(t, "GPU 6 back on nvidia", "nvidia"))
	waitRunningIn(t, passthroughNS, "whole")
	model, uuid, _ := gpuOfIn(t, passthroughNS, "whole", "ctr")
	claim := claimOf(t, passthroughNS, "whole", "gpu")
	if dev := allocatedDevices(t, passthroughNS, claim)["gpu"]; dev != fmt.Sprintf("gpu-%d", passthroughGPU) {
		t.Fatalf("whole got %s, want gpu-%d", dev, passthroughGPU)
	}
	t.Logf("whole pod after the VM: %s %s", model, uuid)
}
