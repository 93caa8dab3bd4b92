// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// What the kubelet plugin's pod may touch on the host and with which
// privileges, rendered for simulated and for real GPUs. The expectations are
// exact sets, so a later change that widens the pod fails here and must
// update this test and the README's Security section together.

const testDriver = "gpu.example.com"

// hostMount is a hostPath volume as the container mounts it.
type hostMount struct {
	host, container string
	readOnly        bool
	propagation     corev1.MountPropagationMode
}

func (m hostMount) String() string {
	return fmt.Sprintf("%s->%s ro=%v %s", m.host, m.container, m.readOnly, m.propagation)
}

// hostMounts lists the plugin container's hostPath mounts and fails on a
// volume of any other kind than hostPath or the documented /tmp emptyDir.
func hostMounts(t *testing.T, ds *appsv1.DaemonSet) []string {
	t.Helper()
	c := plugin(t, ds)
	vols := map[string]corev1.Volume{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	var out []string
	for _, m := range c.VolumeMounts {
		v := vols[m.Name]
		switch {
		case v.HostPath != nil:
			hm := hostMount{host: v.HostPath.Path, container: m.MountPath, readOnly: m.ReadOnly}
			if m.MountPropagation != nil {
				hm.propagation = *m.MountPropagation
			}
			out = append(out, hm.String())
		case v.EmptyDir != nil:
			out = append(out, "emptyDir->"+m.MountPath)
		default:
			t.Errorf("volume %s is neither a hostPath nor an emptyDir: %+v", m.Name, v)
		}
	}
	if len(vols) != len(c.VolumeMounts) {
		t.Errorf("%d volumes for %d mounts: every volume must be one the plugin mounts", len(vols), len(c.VolumeMounts))
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string { sort.Strings(s); return s }

// requireHardened checks the unprivileged container: nothing but the
// capabilities in keep, no escalation, read-only image, RuntimeDefault.
func requireHardened(t *testing.T, ds *appsv1.DaemonSet, keep ...corev1.Capability) {
	t.Helper()
	sc := plugin(t, ds).SecurityContext
	if sc == nil {
		t.Fatal("no securityContext on the plugin container")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged")
	}
	wantEscalation := !slices.Contains(keep, "SYS_ADMIN")
	if !wantEscalation && sc.AllowPrivilegeEscalation != nil {
		t.Error("allowPrivilegeEscalation set next to SYS_ADMIN; the API refuses false there")
	}
	if wantEscalation && (sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation) {
		t.Errorf("allowPrivilegeEscalation %v, want false", sc.AllowPrivilegeEscalation)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("root filesystem not read-only")
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container seccompProfile %+v, want RuntimeDefault", sc.SeccompProfile)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities %+v, want drop [ALL]", sc.Capabilities)
	} else if !slices.Equal(sc.Capabilities.Add, keep) {
		t.Errorf("capabilities added %v, want %v", sc.Capabilities.Add, keep)
	}
	if sc.RunAsUser != nil || sc.ProcMount != nil || sc.SELinuxOptions != nil {
		t.Errorf("unexpected securityContext settings %+v", sc)
	}
}

// requirePodLevel checks what holds for every mode: RuntimeDefault seccomp
// for the pod, no host IPC, host network only when asked for, and host PID
// as wantHostPID says (never, today).
func requirePodLevel(t *testing.T, ds *appsv1.DaemonSet, wantHostPID bool) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if spec.SecurityContext == nil || spec.SecurityContext.SeccompProfile == nil || spec.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v, want seccompProfile RuntimeDefault", spec.SecurityContext)
	}
	if spec.HostPID != wantHostPID {
		t.Errorf("hostPID %v, want %v", spec.HostPID, wantHostPID)
	}
	if spec.HostIPC || spec.HostNetwork || spec.ShareProcessNamespace != nil {
		t.Errorf("hostIPC %v, hostNetwork %v, shareProcessNamespace %v: none is needed", spec.HostIPC, spec.HostNetwork, spec.ShareProcessNamespace)
	}
	if len(spec.InitContainers) != 0 || len(spec.Containers) != 1 {
		t.Errorf("%d init containers, %d containers; want only the plugin", len(spec.InitContainers), len(spec.Containers))
	}
}

func TestChartSimulatedPodIsHardened(t *testing.T) {
	// Whole GPUs and time-slicing only: no MPS, so no host PID namespace.
	// kubeletPlugin.privileged and .capabilities are real-GPU settings that
	// simulated GPUs never get.
	ds := render(t, "simulate.profile=h100x8", "sharing.strategies={TimeSlicing}",
		"driverName="+testDriver, "kubeletDir=/var/lib/k", "cdiRoot=/etc/cdi",
		"kubeletPlugin.privileged=true", "kubeletPlugin.capabilities={SYS_ADMIN}")
	requirePodLevel(t, ds, false)
	requireHardened(t, ds)
	// Its own plugin directory, the registration directory and the CDI
	// directory, each at the path the host has (the kubelet dials the
	// sockets, containerd reads the specs, by host path). No emptyDir: the
	// plugin writes nowhere else, and the e2e suite runs this pod.
	want := sorted(
		hostMount{host: "/var/lib/k/plugins/" + testDriver, container: "/var/lib/k/plugins/" + testDriver}.String(),
		hostMount{host: "/var/lib/k/plugins_registry", container: "/var/lib/k/plugins_registry"}.String(),
		hostMount{host: "/etc/cdi", container: "/etc/cdi"}.String(),
	)
	if got := hostMounts(t, ds); !slices.Equal(got, want) {
		t.Errorf("simulated mounts\n got %v\nwant %v", got, want)
	}
	if v, _ := env(plugin(t, ds), "NVIDIA_VISIBLE_DEVICES"); v != "void" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want void", v)
	}
	if ds.Spec.Template.Spec.RuntimeClassName != nil {
		t.Errorf("runtimeClassName %q by default", *ds.Spec.Template.Spec.RuntimeClassName)
	}
}

// MPS control daemons run in pods of their own (which set hostPID), so the
// plugin runs in its own PID namespace whatever is offered.
func TestChartNeverUsesHostPID(t *testing.T) {
	for _, mode := range [][]string{{"simulate.profile=h100x8"}, nil} {
		for _, strategies := range []string{"{TimeSlicing}", "{MPS}", "{TimeSlicing,MPS}", "null"} {
			ds := render(t, append(slices.Clone(mode), "sharing.strategies="+strategies)...)
			if ds.Spec.Template.Spec.HostPID {
				t.Errorf("%v strategies=%s: hostPID on the plugin pod", mode, strategies)
			}
		}
	}
}

func TestChartRealGPUPrivilegesAndMounts(t *testing.T) {
	ds := render(t, "sharing.strategies={TimeSlicing}", "driverName="+testDriver, "driverRoot=/run/nvidia/driver")
	requirePodLevel(t, ds, false)
	sc := plugin(t, ds).SecurityContext
	if sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Fatalf("real GPUs: securityContext %+v, want privileged (NVML, MIG management)", sc)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("real GPUs: root filesystem not read-only")
	}
	if sc.AllowPrivilegeEscalation != nil || sc.Capabilities != nil {
		t.Errorf("privileged container with escalation/capability settings the API refuses or ignores: %+v", sc)
	}
	want := sorted(
		hostMount{host: "/var/lib/kubelet/plugins/" + testDriver, container: "/var/lib/kubelet/plugins/" + testDriver}.String(),
		hostMount{host: "/var/lib/kubelet/plugins_registry", container: "/var/lib/kubelet/plugins_registry"}.String(),
		hostMount{host: "/var/run/cdi", container: "/var/run/cdi"}.String(),
		hostMount{host: "/run/nvidia/driver", container: "/driver-root", readOnly: true, propagation: corev1.MountPropagationHostToContainer}.String(),
		hostMount{host: "/var/lib/gpu-dra-driver/bin", container: "/var/lib/gpu-dra-driver/bin"}.String(),
		"emptyDir->/tmp",
	)
	if got := hostMounts(t, ds); !slices.Equal(got, want) {
		t.Errorf("real-GPU mounts\n got %v\nwant %v", got, want)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.EmptyDir != nil && (v.EmptyDir.Medium != corev1.StorageMediumMemory || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Value() > 64<<20) {
			t.Errorf("emptyDir %s: %+v, want a small memory-backed scratch", v.Name, v.EmptyDir)
		}
	}
	// A hook of the admin's choice: no hook directory on the host.
	if got := hostMounts(t, render(t, "cdiHook.path=/usr/bin/nvidia-cdi-hook")); slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, "gpu-dra-driver/bin") }) {
		t.Errorf("cdiHook.path still mounts the install dir: %v", got)
	}
}

// kubeletPlugin.privileged=false: clusters that give the plugin its device
// nodes another way run it hardened, keeping only the capabilities named.
func TestChartRealGPUUnprivileged(t *testing.T) {
	ds := render(t, "kubeletPlugin.privileged=false")
	requireHardened(t, ds)
	requirePodLevel(t, ds, false)
	if v, _ := env(plugin(t, ds), "NVIDIA_VISIBLE_DEVICES"); v != "void" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q by default, want void", v)
	}

	ds = render(t, "kubeletPlugin.privileged=false", "kubeletPlugin.capabilities={SYS_ADMIN}",
		"kubeletPlugin.nvidiaVisibleDevices=all", "kubeletPlugin.runtimeClassName=nvidia")
	requireHardened(t, ds, "SYS_ADMIN")
	if v, _ := env(plugin(t, ds), "NVIDIA_VISIBLE_DEVICES"); v != "all" {
		t.Errorf("NVIDIA_VISIBLE_DEVICES = %q, want all", v)
	}
	if rc := ds.Spec.Template.Spec.RuntimeClassName; rc == nil || *rc != "nvidia" {
		t.Errorf("runtimeClassName %v, want nvidia", rc)
	}
	// A privileged plugin never asks the NVIDIA runtime for GPUs.
	if v, _ := env(plugin(t, render(t, "kubeletPlugin.nvidiaVisibleDevices=all")), "NVIDIA_VISIBLE_DEVICES"); v != "void" {
		t.Errorf("privileged plugin: NVIDIA_VISIBLE_DEVICES = %q, want void", v)
	}
}
