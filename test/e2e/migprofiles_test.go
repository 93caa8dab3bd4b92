// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	migProfilesNS   = "gpu-migprofiles"
	migProfilesFlag = "--mig-profiles=1g.10gb,3g.40gb,7g.80gb"
)

// placements is what one dynamic-MIG H100 publishes of each profile
// (25 MIG devices besides the whole GPU); with --mig-profiles=1g.10gb,
// 3g.40gb,7g.80gb only 7 + 2 + 1 of them. The node (hack/cluster/deploy.sh
// h100x8) has 8 GPUs and 8 monitor devices, and GPU 7 (its
// fractionalMemoryGPUs) publishes no MIG devices.
var placements = map[string]int{"1g.10gb": 7, "1g.10gb+me": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}

// expectDevices is what the node publishes with migGPUs dynamic-MIG GPUs
// and the profiles listed (none: all of them).
func expectDevices(migGPUs int, listed ...string) map[string]int {
	want := map[string]int{"gpu": 8, "monitor": 8}
	for p, n := range placements {
		if len(listed) == 0 || slices.Contains(listed, p) {
			want[p] = n * migGPUs
		}
	}
	return want
}

// publishedDevices counts the devices of the driver's pool at its newest
// generation, MIG devices by profile and the others by type, and records
// the parent GPU minors of each MIG profile; complete is false while the
// pool's slices are being replaced.
func publishedDevices(t *testing.T) (counts map[string]int, parents map[string][]int64, complete bool) {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: node1Slices()})
	if err != nil {
		t.Fatal(err)
	}
	var gen, n, want int64
	for _, s := range list.Items {
		gen = max(gen, s.Spec.Pool.Generation)
	}
	counts, parents = map[string]int{}, map[string][]int64{}
	for _, s := range list.Items {
		if s.Spec.Pool.Generation != gen {
			continue
		}
		n, want = n+1, s.Spec.Pool.ResourceSliceCount
		for _, d := range s.Spec.Devices {
			key := "?"
			if v := d.Attributes["type"].StringValue; v != nil {
				key = *v
			}
			if key == "mig" && d.Attributes["profile"].StringValue != nil {
				key = *d.Attributes["profile"].StringValue
				if m, ok := migParentMinor(d.Name); ok && !slices.Contains(parents[key], m) {
					parents[key] = append(parents[key], m)
				}
			}
			counts[key]++
		}
	}
	return counts, parents, n > 0 && n == want
}

// waitPublished waits until the node publishes exactly want; heldMinor >= 0
// is the one GPU on which the profile held also counts (the one whose MIG
// device a prepared claim holds).
func waitPublished(t *testing.T, what string, want map[string]int, held string, heldMinor int64) map[string]int {
	t.Helper()
	var counts map[string]int
	waitFor(t, what, 90*time.Second, func() (bool, string) {
		c, parents, complete := publishedDevices(t)
		counts = c
		state := fmt.Sprintf("complete=%v devices=%v %s on GPUs %v", complete, c, held, parents[held])
		if !complete || !maps.Equal(c, want) {
			return false, state
		}
		return heldMinor < 0 || slices.Equal(parents[held], []int64{heldMinor}), state
	})
	return counts
}

// setMigProfiles upgrades the release in place, keeping its other values,
// and waits for a Ready plugin with (or without) the flag.
// The list is set with --set; the empty one with --set-json, as --set's
// {} is [""] and a null under --reuse-values keeps the old list.
func setMigProfiles(t *testing.T, set, value string) {
	t.Helper()
	helm(t, "upgrade", "gpu-dra-driver", filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver"),
		"--namespace", driverNS, "--reuse-values", set, "kubeletPlugin.migProfiles="+value, "--wait", "--timeout", "120s")
	waitPluginReady(t, "the plugin with kubeletPlugin.migProfiles="+value, func(p corev1.Pod) bool {
		args := p.Spec.Containers[0].Args
		return slices.Contains(args, migProfilesFlag) == (value != "[]") &&
			!slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--mig-profiles=") && a != migProfilesFlag })
	})
}

// migPod is a pod whose claim asks for one MIG device of profile.
func migPod(name, profile string) string {
	return classTemplate(name, migProfilesNS, "mig.nvidia.com", fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile == '%s'", profile)) +
		"---\n" + claimPod(name, migProfilesNS, name, "", map[string]string{"ctr": ""})
}

// TestMigProfiles: kubeletPlugin.migProfiles=[1g.10gb, 3g.40gb, 7g.80gb]
// makes the node publish only those MIG profiles, but for the profile of
// a MIG device that a prepared claim holds, on its GPU only, until the
// claim is released and the plugin restarts. A listed profile can be
// claimed; an unlisted one stays Pending.
func TestMigProfiles(t *testing.T) {
	requireCleanNode(t)
	var migGPUs int
	// Cleanups run last first: the namespace (its claims unprepared) goes
	// before the chart is given its full list back.
	t.Cleanup(func() {
		setMigProfiles(t, "--set-json", "[]")
		waitPublished(t, "every MIG profile published again", expectDevices(migGPUs), "", -1)
	})
	testNamespace(t, migProfilesNS)
	ctx := context.Background()
	start := time.Now()
	waitFor(t, "the node's pool", 30*time.Second, func() (bool, string) {
		_, parents, complete := publishedDevices(t)
		migGPUs = len(parents["7g.80gb"])
		return complete, "partial pool"
	})
	waitPublished(t, "every MIG profile published", expectDevices(migGPUs), "", -1)
	if migGPUs < 2 {
		t.Fatalf("%d dynamic-MIG GPUs published, the test needs 2", migGPUs)
	}
	t.Logf("%d dynamic-MIG GPUs publish every profile: %v", migGPUs, expectDevices(migGPUs))

	applyYAML(t, migPod("held-2g", "2g.20gb"))
	waitRunningIn(t, migProfilesNS, "held-2g")
	claim := claimOf(t, migProfilesNS, "held-2g", "gpu")
	held := allocatedDevices(t, migProfilesNS, claim)["gpu"]
	_, ok := sliceDevice(t, held)
	heldMinor, isMig := migParentMinor(held)
	if !ok || !isMig {
		t.Fatalf("claim %s holds %q, not a published MIG device", claim, held)
	}
	t.Logf("held-2g: claim %s holds %s on gpu-%d", claim, held, heldMinor)

	setMigProfiles(t, "--set", "{1g.10gb,3g.40gb,7g.80gb}")
	// The held profile stays, every placement of it, on its GPU only.
	listed := expectDevices(migGPUs, "1g.10gb", "3g.40gb", "7g.80gb")
	want := maps.Clone(listed)
	want["2g.20gb"] = placements["2g.20gb"]
	got := waitPublished(t, "the listed profiles and the held 2g.20gb on gpu-"+fmt.Sprint(heldMinor), want, "2g.20gb", heldMinor)
	t.Logf("published with %s and %s held: %v", migProfilesFlag, held, got)
	if _, ok := sliceDevice(t, held); !ok {
		t.Fatalf("the held device %s is no longer published", held)
	}

	// A listed profile is claimed and carved; an unlisted one matches
	// nothing and its pod stays unscheduled.
	applyYAML(t, migPod("small-1g", "1g.10gb"))
	applyYAML(t, migPod("unlisted-1g20", "1g.20gb"))
	waitRunningIn(t, migProfilesNS, "small-1g")
	if _, parent, migs := gpuOfIn(t, migProfilesNS, "small-1g", "ctr"); len(migs) != 1 || !strings.HasPrefix(migs[0], "1g.10gb=") {
		t.Fatalf("small-1g sees MIG devices %v on %s, want one 1g.10gb", migs, parent)
	} else {
		t.Logf("small-1g: %s on %s", migs[0], parent)
	}
	pendingSince := time.Now()
	unscheduled := func() (bool, string) {
		p := podIn(t, migProfilesNS, "unlisted-1g20")
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				return c.Status == corev1.ConditionFalse && p.Spec.NodeName == "", fmt.Sprintf("%s %s: %s (node %q)", c.Status, c.Reason, c.Message, p.Spec.NodeName)
			}
		}
		return false, "no PodScheduled condition, phase " + string(p.Status.Phase)
	}
	waitFor(t, "unlisted-1g20 PodScheduled=False", 60*time.Second, unscheduled)
	time.Sleep(time.Until(pendingSince.Add(15 * time.Second)))
	if ok, state := unscheduled(); !ok {
		t.Fatalf("unlisted-1g20 (1g.20gb, not listed) after 15s: %s", state)
	} else {
		t.Logf("unlisted-1g20 after 15s: PodScheduled=%s", state)
	}
	kubectl(t, "delete", "pod", "-n", migProfilesNS, "unlisted-1g20", "held-2g", "--wait=true", "--timeout=90s")

	// Released, the 2g.20gb device goes at the next plugin start.
	waitFor(t, "claim "+claim+" deleted", 60*time.Second, func() (bool, string) {
		_, err := client.ResourceV1().ResourceClaims(migProfilesNS).Get(ctx, claim, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	waitFor(t, "the 2g.20gb MIG instance destroyed", 60*time.Second, func() (bool, string) {
		n := migInstances(t)
		return n == 1, fmt.Sprintf("%d MIG instances", n)
	})
	if c, _, _ := publishedDevices(t); c["2g.20gb"] != want["2g.20gb"] {
		t.Errorf("before the plugin restarts, %d 2g.20gb devices published, want the %d it started with", c["2g.20gb"], want["2g.20gb"])
	}
	old := pluginPods(t)
	for _, p := range pluginPodList(t) {
		kubectl(t, "delete", "pod", "-n", driverNS, p.Name, "--wait=false")
	}
	waitNewPlugin(t, old)
	got = waitPublished(t, "only the listed profiles after the restart", listed, "", -1)
	t.Logf("published after the claim's release and a plugin restart: %v (test body %v)", got, time.Since(start).Round(time.Second))
	if out, err := exec.Command("kubectl", "delete", "pod", "-n", migProfilesNS, "small-1g", "--wait=true", "--timeout=90s").CombinedOutput(); err != nil {
		t.Errorf("deleting small-1g: %v\n%s", err, out)
	}
	waitNodeClean(t, "after TestMigProfiles", nil)
}

// migParentMinor is the minor of a MIG device's GPU, from its name
// (gpu-<minor>-mig-<profile>-<giProfileID>-<start>, or without the ID on
// a static MIG device or one allocated before the IDs): MIG devices do not publish it as an
// attribute (resourceslices.MigDetails).
func migParentMinor(device string) (int64, bool) {
	var minor int64
	_, err := fmt.Sscanf(device, "gpu-%d-mig-", &minor)
	return minor, err == nil
}
