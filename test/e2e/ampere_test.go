// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

const ampereNS = "gpu-ampere"

// deployProfile deploys this checkout with a simulated profile and waits
// for a ready plugin of that profile and a complete pool.
func deployProfile(t *testing.T, profile string) {
	t.Helper()
	deployCurrent(t, profile)
	waitPluginReady(t, "a ready plugin pod simulating "+profile, func(p corev1.Pod) bool {
		return envOf(p.Spec.Containers[0], "SIMULATE_PROFILE") == profile
	})
	// Ready says the plugin started, not that the pool it republished is
	// complete: a test that counts devices right after (capacity, after
	// TestAmpereDynamicMIG's clean-up) would count a pool mid-change.
	completePool(t)
}

// TestAmpereDynamicMIG: A100s whose admin turned MIG mode on
// (simulate.profile a100-40gbx8:mig): a claim for a 1g.5gb MIG device gets
// one, created when the pod lands, on an A100, and it is destroyed with
// the claim while the GPU keeps its MIG mode.
func TestAmpereDynamicMIG(t *testing.T) {
	requireCleanNode(t)
	const profile = "a100-40gbx8:mig"
	t.Cleanup(func() { deployProfile(t, "h100x8") })
	deployProfile(t, profile)

	// deploy.sh passed the profile through to the release and the plugin.
	out, err := exec.Command("helm", "get", "values", helmRelease, "-n", driverNS, "-o", "yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("helm get values: %v\n%s", err, out)
	}
	var vals struct {
		Simulate struct {
			Profile string `json:"profile"`
		} `json:"simulate"`
	}
	if err := yaml.Unmarshal(out, &vals); err != nil || vals.Simulate.Profile != profile {
		t.Fatalf("release values say simulate.profile %q (%v), want %q:\n%s", vals.Simulate.Profile, err, profile, out)
	}
	gpus, migs := 0, map[string]int{}
	waitFor(t, "the node's slices to publish A100s with 1g.5gb MIG devices", 60*time.Second, func() (bool, string) {
		gpus, migs = 0, map[string]int{}
		for _, s := range completePool(t) {
			for _, d := range s.Spec.Devices {
				str := func(k string) string {
					if a, ok := d.Attributes[resourceapi.QualifiedName(k)]; ok && a.StringValue != nil {
						return *a.StringValue
					}
					return ""
				}
				switch str("type") {
				case "gpu":
					if !strings.Contains(str("productName"), "A100") {
						return false, "GPU " + d.Name + " is a " + str("productName")
					}
					gpus++
				case "mig":
					migs[str("profile")]++
				}
			}
		}
		return migs["1g.5gb"] > 0, fmt.Sprintf("%d GPUs, MIG devices %v", gpus, migs)
	})
	t.Logf("%s publishes %d whole A100s and MIG devices %v", profile, gpus, migs)

	testNamespace(t, ampereNS)
	applyYAML(t, fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-1g5gb, namespace: %s}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]
`, ampereNS)+"---\n"+claimPod("mig", ampereNS, "mig-1g5gb", "", map[string]string{"ctr": ""}))
	waitRunningIn(t, ampereNS, "mig")
	model, parent, seenMigs := gpuOfIn(t, ampereNS, "mig", "ctr")
	if !strings.Contains(model, "A100") || len(seenMigs) != 1 || !strings.HasPrefix(seenMigs[0], "1g.5gb=MIG-") {
		t.Fatalf("the pod sees %s %s with MIG devices %v; want one 1g.5gb MIG device of an A100", model, parent, seenMigs)
	}
	_, uuid, _ := strings.Cut(seenMigs[0], "=")
	waitStatusUUIDs(t, ampereNS, claimOf(t, ampereNS, "mig", "gpu"), func(m map[string]string) bool {
		for _, u := range m {
			return u == uuid
		}
		return false
	})
	if n := migInstances(t); n != 1 {
		t.Fatalf("%d MIG instances while the pod runs, want 1", n)
	}
	t.Logf("the pod sees a 1g.5gb MIG device %s of %s (%s)", uuid, parent, model)

	kubectl(t, "delete", "namespace", ampereNS, "--wait=true", "--timeout=180s")
	// The admin's MIG mode stays on; everything the claim made goes.
	waitNodeClean(t, "after the A100 MIG claim was deleted", func(l string) bool { return strings.HasPrefix(l, "MIG mode on for ") })
}
