// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/dcgmview"
)

const (
	staticMigNS      = "gpu-podresources-static"
	staticMigProfile = "3g.40gb"
)

// testStaticMig is TestPodResources' static MIG device: an admin
// partitions an idle GPU into two 3g.40gb devices while the plugin is
// stopped (gpudra simulate-admin-mig, as nvidia-smi mig -cgi ... -C), the
// plugin publishes them as they are, with their uuid, and a pod gets one
// of them. The exporter's rules must attribute it by its uuid attribute
// (the name of a static MIG device is not the form the exporter parses) to
// the MIG device and parent GPU the container sees. The GPU is then given
// back: the layout destroyed with the plugin stopped again, MIG mode off,
// and the pool as it was, for the tests after this one.
func testStaticMig(t *testing.T, gpudra string) {
	start := time.Now()
	before := poolDevices(t)
	minor, parent := idleWholeGPU(t, before)
	plugin := pluginPod(t)
	profile, node := envOf(plugin.Spec.Containers[0], "SIMULATE_PROFILE"), plugin.Spec.NodeName
	admin := func(args ...string) string {
		t.Helper()
		args = append([]string{"simulate-admin-mig", "--simulate", profile, "--node-name", node, "--state-dir", stateDir(),
			"--driver-name", driverName, "--gpu", fmt.Sprint(minor)}, args...)
		out, err := exec.Command(gpudra, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("gpudra %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Whatever fails, the plugin runs again and the GPU is whole again:
	// restore first, the DaemonSet's node selector last.
	t.Cleanup(pluginUp)
	// made: the admin's MIG devices, once made.
	var made []string
	// restored is set once the node is as before; a restore that failed
	// part way runs again from the start in the cleanup (each step is
	// idempotent).
	restored := false
	restore := func() {
		if restored {
			return
		}
		mark := time.Now()
		// The namespace goes on going while the plugin restarts (its
		// cleanup waits for the rest); the claim's record is gone once
		// the pod's containers stopped and the plugin unprepared it.
		kubectl(t, "delete", "namespace", staticMigNS, "--ignore-not-found", "--wait=false")
		// The claim unprepared (the admin command refuses a held GPU);
		// only the admin's layout is left.
		waitNodeClean(t, "but the admin's layout after the static MIG pod", func(l string) bool {
			return strings.HasSuffix(l, parent) || slices.ContainsFunc(made, func(u string) bool { return strings.HasSuffix(l, u) })
		})
		unprepared := time.Since(mark)
		pluginDown(t)
		out := strings.TrimSpace(admin("--destroy-all"))
		down := time.Since(mark)
		pluginUp()
		waitPluginReady(t, "the plugin up again", func(corev1.Pod) bool { return true })
		up := time.Since(mark)
		defer func() {
			t.Logf("restore: claim unprepared after %s, plugin down and %q after %s, plugin ready after %s, the pool as before after %s",
				unprepared.Round(100*time.Millisecond), out, down.Round(100*time.Millisecond), up.Round(100*time.Millisecond), time.Since(mark).Round(100*time.Millisecond))
		}()
		waitFor(t, "the pool as it was before the static MIG layout", 120*time.Second, func() (bool, string) {
			now := poolDevices(t)
			whole := now[fmt.Sprintf("gpu-%d", minor)]
			if !slices.Equal(slices.Sorted(maps.Keys(now)), slices.Sorted(maps.Keys(before))) || stringAttr(whole, "uuid") != parent {
				return false, fmt.Sprintf("%d devices (%d before), gpu-%d uuid %q", len(now), len(before), minor, stringAttr(whole, "uuid"))
			}
			return true, ""
		})
		waitNodeClean(t, "after the static MIG layout was destroyed", nil)
		restored = true
	}
	t.Cleanup(restore)

	// The admin's layout, made while the plugin is down.
	mark := time.Now()
	pluginDown(t)
	down := time.Since(mark)
	made = createdMigUUIDs(t, admin("--create", staticMigProfile+","+staticMigProfile))
	pluginUp()
	waitPluginReady(t, "the plugin up on the admin's layout", func(corev1.Pod) bool { return true })
	var static []string
	waitFor(t, "the plugin publishing the static MIG devices with their uuid", 120*time.Second, func() (bool, string) {
		static = static[:0]
		for _, d := range poolDevices(t) {
			if stringAttr(d, "type") == "mig" && stringAttr(d, "parentUUID") == parent {
				static = append(static, stringAttr(d, "uuid"))
			}
		}
		slices.Sort(static)
		return slices.Equal(static, made), fmt.Sprintf("MIG devices of %s with uuids %v, the admin made %v", parent, static, made)
	})
	setup := time.Since(mark)

	// A pod on one of them, picked by its uuid.
	mark = time.Now()
	testNamespace(t, staticMigNS)
	want := made[0]
	applyYAML(t, classTemplate("static", staticMigNS, "mig.nvidia.com", fmt.Sprintf(`device.attributes["%s"].uuid == %q`, driverName, want))+
		"---\n"+claimPod("static", staticMigNS, "static", "", map[string]string{"ctr": ""}))
	waitRunningIn(t, staticMigNS, "static")
	s := look(t, staticMigNS, "static", "ctr")
	if !slices.Equal(s.migs, []string{staticMigProfile + "=" + want}) || s.gpu != parent {
		t.Fatalf("the container sees GPU %s and MIG devices %v; want %s=%s on %s", s.gpu, s.migs, staticMigProfile, want, parent)
	}
	claim := claimOf(t, staticMigNS, "static", "gpu")
	allocated := allocatedDevices(t, staticMigNS, claim)["gpu"]

	resp, err := dcgmview.List(context.Background(), dcgmview.SocketPath(kubeletDir))
	if err != nil {
		t.Fatal(err)
	}
	var listed []dcgmview.ContainerDevice
	for _, d := range dcgmview.Containers(resp, dcgmview.NewIndex(completePool(t))) {
		if d.Namespace == staticMigNS {
			listed = append(listed, d)
		}
	}
	if len(listed) != 1 || listed[0].Pod != "static" || listed[0].Container != "ctr" || listed[0].Device != allocated {
		t.Fatalf("PodResources lists %+v in %s; want static/ctr with its claim's device %s", listed, staticMigNS, allocated)
	}
	d, id := listed[0], listed[0].Identity
	t.Logf("static/ctr: claim %s, device %s/%s -> %+v; saw %s %v", d.ClaimName, d.Pool, d.Device, id, s.gpu, s.migs)
	if d.ClaimName != claim || d.ClaimNamespace != staticMigNS {
		t.Errorf("PodResources names claim %s/%s, the pod's claim is %s/%s", d.ClaimNamespace, d.ClaimName, staticMigNS, claim)
	}
	if !slices.ContainsFunc(d.CDIDevices, func(c string) bool { return strings.HasSuffix(c, "-"+d.Device) }) {
		t.Errorf("CDI devices %v of %s do not name it", d.CDIDevices, d.Device)
	}
	// By the uuid attribute, not the name: the exporter reads a MIG
	// device's name only where it has no uuid (dra.go, buildDeviceMapping),
	// and a static MIG device's name has no GPU instance profile ID.
	if !d.Resolved || id.Type != "mig" || id.GPUUUID != parent || id.MIGUUID != want || id.Profile != staticMigProfile || id.Dynamic != nil {
		t.Errorf("the exporter attributes %s to %+v (spec %+v, resolved %v); the container sees MIG device %s on %s", d.Device, id, id.Dynamic, d.Resolved, want, parent)
	}
	if spec, ok := dcgmview.ParseDynamicMigName(d.Device); ok {
		t.Errorf("the static MIG device's name %s reads as a dynamic one (%+v): the exporter would not need its uuid", d.Device, spec)
	}
	if f := readTrim(t, filepath.Join(stateDir(), "simulated", "dev", "mig", want)); f != want+"\t"+staticMigProfile+"\t"+parent {
		t.Errorf("the simulated MIG device %s is %q, want profile %s on %s", want, f, staticMigProfile, parent)
	}
	podTime := time.Since(mark)

	mark = time.Now()
	restore()
	t.Logf("static MIG on GPU %d: plugin down in %s, layout made and published in %s, pod and PodResources %s, GPU given back in %s; %s in all",
		minor, down.Round(100*time.Millisecond), setup.Round(100*time.Millisecond), podTime.Round(100*time.Millisecond),
		time.Since(mark).Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// startGpudraBuild builds the operator CLI of this checkout (as
// buildGpudra) while the caller goes on; the returned function waits for
// it and returns the binary.
func startGpudraBuild(t *testing.T) func() string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpudra")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gpudra")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Start()
	wait := sync.OnceValue(func() error {
		if err != nil {
			return err
		}
		return cmd.Wait()
	})
	// A test that ends early still waits for the build: its directory
	// goes after this (cleanups run last registered first).
	t.Cleanup(func() { _ = wait() })
	return func() string {
		t.Helper()
		if err := wait(); err != nil {
			t.Fatalf("go build ./cmd/gpudra: %v\n%s", err, out.String())
		}
		return bin
	}
}

// idleWholeGPU picks the highest minor among the GPUs published whole and
// not shareable (gpu-7 of the local cluster is a fraction GPU), and its
// UUID. The caller's node is clean: nothing is allocated.
func idleWholeGPU(t *testing.T, pool map[string]resourceapi.Device) (int, string) {
	t.Helper()
	minor, uuid := -1, ""
	for name, d := range pool {
		m, ok := d.Attributes["minor"]
		if stringAttr(d, "type") != "gpu" || !ok || m.IntValue == nil || name != fmt.Sprintf("gpu-%d", *m.IntValue) ||
			(d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations) {
			continue
		}
		if int(*m.IntValue) > minor {
			minor, uuid = int(*m.IntValue), stringAttr(d, "uuid")
		}
	}
	if minor < 0 || uuid == "" {
		t.Fatalf("no whole GPU among the %d published devices", len(pool))
	}
	return minor, uuid
}

// poolDevices is the driver's complete pool, by device name.
func poolDevices(t *testing.T) map[string]resourceapi.Device {
	t.Helper()
	out := map[string]resourceapi.Device{}
	for _, s := range completePool(t) {
		for _, d := range s.Spec.Devices {
			out[d.Name] = d
		}
	}
	return out
}

func stringAttr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// createdMigUUIDs reads the MIG UUIDs gpudra simulate-admin-mig printed
// ("GPU <minor> (<uuid>): created <profile> at slice <n>: <MIG uuid>"),
// sorted.
func createdMigUUIDs(t *testing.T, out string) []string {
	t.Helper()
	var uuids []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if i := strings.LastIndex(line, ": MIG-"); i >= 0 && strings.Contains(line, "created") {
			uuids = append(uuids, line[i+2:])
		}
	}
	if len(uuids) != 2 {
		t.Fatalf("gpudra simulate-admin-mig made %d MIG devices, want 2:\n%s", len(uuids), out)
	}
	slices.Sort(uuids)
	return uuids
}

// pluginDown stops the plugin the way TestMPSDaemonGoneWhenUnpreparedWhilePluginDown
// does: a node selector no node matches makes the DaemonSet delete its
// pod, and no new one starts. It returns when the pod is gone, its
// process with it.
func pluginDown(t *testing.T) {
	t.Helper()
	kubectl(t, "patch", "daemonset", "-n", driverNS, pluginDS, "--type=merge", "-p", `{"spec":{"template":{"spec":{"nodeSelector":{"gpu-dra-e2e/plugin-down":"true"}}}}}`)
	waitFor(t, "no plugin pod", 120*time.Second, func() (bool, string) {
		n := len(pluginPodList(t))
		return n == 0, fmt.Sprintf("%d plugin pods", n)
	})
}

// pluginUp lets the DaemonSet start the plugin again; the caller waits for
// what it needs of it (the pool it publishes).
func pluginUp() {
	if out, err := exec.Command("kubectl", "patch", "daemonset", "-n", driverNS, pluginDS, "--type=merge", "-p", `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "restoring the plugin DaemonSet's node selector: %v\n%s", err, out)
	}
}
