// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

// TestNVIDIACompat's MIGAttributes subtest, the nvcAttr it alone uses, and the deploy helpers.

import (
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
)

// nvcMIGAttributes is TestNVIDIACompat's MIGAttributes subtest, run under
// the default deploy (see TestNVIDIACompat).
func nvcMIGAttributes(t *testing.T) {
	var pool map[string]resourceapi.Device
	waitFor(t, "node 1's pool with dynamic MIG devices", 60*time.Second, func() (bool, string) {
		var ok bool
		pool, ok = nvcPool(t)
		return ok && len(nvcOfType(pool, "mig")) > 0 && len(nvcOfType(pool, "gpu")) == 8, fmt.Sprintf("complete %v, %d GPUs, %d MIG devices", ok, len(nvcOfType(pool, "gpu")), len(nvcOfType(pool, "mig")))
	})
	byUUID := map[string]resourceapi.Device{}
	for _, g := range nvcOfType(pool, "gpu") {
		byUUID[nvcStr(g, "uuid")] = g
	}
	// docs/mig.md, "Attributes and claims": the parent's, same name,
	// same value (absent where the parent has none).
	inherited := []resourceapi.QualifiedName{"productName", "brand", "architecture", "cudaComputeCapability", "driverVersion", "cudaDriverVersion",
		"addressingMode", "resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"}
	migs := nvcOfType(pool, "mig")
	for _, m := range migs {
		parent, ok := byUUID[nvcStr(m, "parentUUID")]
		if !ok {
			t.Errorf("MIG device %s: parentUUID %q is no GPU of the pool", m.Name, nvcStr(m, "parentUUID"))
			continue
		}
		for _, a := range inherited {
			pa, pok := parent.Attributes[a]
			ma, mok := m.Attributes[a]
			if pok != mok || fmt.Sprint(nvcAttr(pa)) != fmt.Sprint(nvcAttr(ma)) {
				t.Errorf("MIG device %s: %s = %v (published %v), its parent %s's %v (published %v)", m.Name, a, nvcAttr(ma), mok, parent.Name, nvcAttr(pa), pok)
			}
		}
		for _, a := range []resourceapi.QualifiedName{"brand", "driverVersion", "cudaDriverVersion", "resource.kubernetes.io/pciBusID"} {
			if _, ok := m.Attributes[a]; !ok {
				t.Errorf("MIG device %s has no %s", m.Name, a)
			}
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d MIG devices, each with its parent's %v", len(migs), inherited)

	// docs/claims.md's selector of a MIG device on a node with driver
	// 550 or newer, and one by brand and the PCI address of GPU 3.
	gpu3, ok := pool["gpu-3"]
	if !ok {
		t.Fatal("no gpu-3")
	}
	bySemver := "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"
	byPCI := fmt.Sprintf("device.attributes['gpu.nvidia.com'].brand == 'Nvidia' && device.attributes['resource.kubernetes.io'].pciBusID == '%s'", nvcStr(gpu3, "resource.kubernetes.io/pciBusID"))
	applyYAML(t, nvcClaim("mig-driver", "mig.nvidia.com", bySemver, "")+"---\n"+nvcClaim("mig-pci", "mig.nvidia.com", byPCI, "")+"---\n"+
		claimPod("mig-driver", nvcNS, "", "mig-driver", map[string]string{"ctr": ""})+"---\n"+claimPod("mig-pci", nvcNS, "", "mig-pci", map[string]string{"ctr": ""}))
	waitRunningIn(t, nvcNS, "mig-driver", "mig-pci")
	for name, sel := range map[string]string{"mig-driver": bySemver, "mig-pci": byPCI} {
		r := nvcAllocation(t, name)
		d, ok := pool[r.Device]
		if !ok || nvcStr(d, "type") != "mig" || r.Pool != hostNode() {
			t.Fatalf("claim %s by %q got %s/%s, want a MIG device of %s", name, sel, r.Pool, r.Device, hostNode())
		}
		if name == "mig-pci" && nvcStr(d, "parentUUID") != nvcStr(gpu3, "uuid") {
			t.Fatalf("claim %s by %q got %s of %s, want a MIG device of gpu-3 (%s)", name, sel, r.Device, nvcStr(d, "parentUUID"), nvcStr(gpu3, "uuid"))
		}
		model, parent, seen := gpuOfIn(t, nvcNS, name, "ctr")
		if parent != nvcStr(d, "parentUUID") || len(seen) != 1 || !strings.HasPrefix(seen[0], nvcStr(d, "profile")+"=MIG-") {
			t.Fatalf("pod %s sees %s %s with MIG devices %v; want one %s MIG device of %s", name, model, parent, seen, nvcStr(d, "profile"), nvcStr(d, "parentUUID"))
		}
		t.Logf("claim %s by %q: %s; the pod sees %s of %s", name, sel, r.Device, seen[0], parent)
	}
	nvcCheckAliases(t, map[string]float64{"mig": 2})
}

// deployWithEnv deploys this checkout with a simulated profile as
// deployCurrent does, with env added to hack/cluster/deploy.sh's
// environment (VALUES=...), and waits for a ready plugin pod that want
// accepts and a complete pool, as deployProfile does.
func deployWithEnv(t *testing.T, profile string, env []string, what string, want func(corev1.Pod) bool) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "deploy.sh"), profile)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s hack/cluster/deploy.sh %s: %v\n%s", strings.Join(env, " "), profile, err, out)
	}
	t.Logf("%s deploy.sh %s took %.1fs:\n%s", strings.Join(env, " "), profile, time.Since(start).Seconds(), strings.TrimSpace(string(out)))
	waitPluginReady(t, what, func(p corev1.Pod) bool {
		return envOf(p.Spec.Containers[0], "SIMULATE_PROFILE") == profile && want(p)
	})
	completePool(t)
}

// nvcRestoreDefault puts the default deploy (deploy.sh h100x8) back and
// waits for a plugin pod of it: the profile is the same as the example
// file's deploy, so the pod must also be one without consumable shares.
func nvcRestoreDefault(t *testing.T) {
	t.Helper()
	deployWithEnv(t, "h100x8", nil, "a ready plugin pod of the default deploy", func(p corev1.Pod) bool {
		return !slices.ContainsFunc(p.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--consumable-shares") })
	})
}

// nvcAttr is an attribute's value, whatever its type.
func nvcAttr(a resourceapi.DeviceAttribute) any {
	switch {
	case a.StringValue != nil:
		return "string " + *a.StringValue
	case a.VersionValue != nil:
		return "version " + *a.VersionValue
	case a.IntValue != nil:
		return *a.IntValue
	case a.BoolValue != nil:
		return *a.BoolValue
	}
	return nil
}
