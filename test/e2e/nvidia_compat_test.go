// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const nvcNS = "gpu-nvidia-compat"

// TestNVIDIACompat: what NVIDIA's reference driver's users and its own
// Ginkgo suite rely on (issue 58), with the chart installed as NVIDIA's CI
// installs its driver to run that suite, docs/examples/consumable-shares.yaml
// (consumable shares, mode unlimited, every GPU):
//
//   - Attributes: node 1's GPUs are published as NVIDIA's shareable
//     devices (allowMultipleAllocations, memory with NVIDIA's request
//     policy, the SM count as an attribute, no MIG devices) with NVIDIA's
//     attributes; addressingMode only where the driver is R580 or newer;
//     NVIDIA's cel/driverVersion claim gets a share and its pod runs.
//   - ConsumableSharesUnlimited: two claims that ask for nothing are
//     allocated shares of one GPU, and both pods run on it.
//   - ConsumableSharesMemory: two claims of capacity.requests.memory land
//     on one GPU, each consuming what it asked, and both pods run.
//   - Metrics: node 1's plugin serves NVIDIA's nvidia_dra_* names as
//     docs/monitoring.md says: the same series as ours (again once the
//     pods are gone, with their unprepares counted).
//
// Then, with the default deploy put back (the one the test must restore
// anyway: the example file publishes no MIG devices):
//
//   - MIGAttributes: every MIG device carries its parent GPU's attributes;
//     a MIG claim by driverVersion as docs/claims.md writes it, and one by
//     brand and a GPU's pciBusID, are allocated (the latter on that GPU)
//     and their pods run; nvidia_dra_prepared_devices counts them as mig.
//
// The node is left clean, with the default deploy.
func TestNVIDIACompat(t *testing.T) {
	requireCleanNode(t)
	values, err := filepath.Abs(filepath.Join(repoRoot, "docs", "examples", "consumable-shares.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			nvcRestoreDefault(t)
		}
	})
	deployWithEnv(t, "h100x8", []string{"VALUES=" + values}, "a ready plugin pod offering consumable shares (unlimited)", func(p corev1.Pod) bool {
		return slices.Contains(p.Spec.Containers[0].Args, "--consumable-shares=unlimited")
	})
	testNamespace(t, nvcNS)

	// What node 1 publishes under the example file: every GPU shareable.
	var pool map[string]resourceapi.Device
	waitFor(t, "node 1's pool of 8 shareable GPUs", 60*time.Second, func() (bool, string) {
		var ok bool
		pool, ok = nvcPool(t)
		if !ok {
			return false, "partial pool"
		}
		gpus, shareable := nvcOfType(pool, "gpu"), 0
		for _, d := range gpus {
			if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
				shareable++
			}
		}
		return len(gpus) == 8 && shareable == 8, fmt.Sprintf("%d GPUs, %d shareable, %d MIG devices", len(gpus), shareable, len(nvcOfType(pool, "mig")))
	})

	// claims are this deploy's claims, each of one device, that pods run with.
	var claims []string
	t.Run("Attributes", func(t *testing.T) {
		gpus := nvcOfType(pool, "gpu")
		if migs := nvcOfType(pool, "mig"); len(migs) != 0 {
			t.Errorf("%d MIG devices published; a GPU offered for consumable shares is not partitioned (docs/sharing.md)", len(migs))
		}
		pci := regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
		driver := ""
		for _, d := range gpus {
			for _, a := range []resourceapi.QualifiedName{"uuid", "productName", "brand", "architecture", "resource.kubernetes.io/pciBusID"} {
				if nvcStr(d, a) == "" {
					t.Errorf("GPU %s has no string attribute %s", d.Name, a)
				}
			}
			if v := nvcStr(d, "resource.kubernetes.io/pciBusID"); !pci.MatchString(v) {
				t.Errorf("GPU %s: pciBusID %q is not a PCI address", d.Name, v)
			}
			for _, a := range []resourceapi.QualifiedName{"cudaComputeCapability", "driverVersion", "cudaDriverVersion"} {
				if nvcVersion(d, a) == "" {
					t.Errorf("GPU %s has no version attribute %s", d.Name, a)
				}
			}
			if driver == "" {
				driver = nvcVersion(d, "driverVersion")
			} else if v := nvcVersion(d, "driverVersion"); v != driver {
				t.Errorf("GPU %s: driverVersion %s, another GPU's %s", d.Name, v, driver)
			}
			// docs/claims.md: addressingMode is NVML's answer, which drivers
			// before R580 lack (the simulator's default, 570.133.20).
			mode, has := d.Attributes["addressingMode"]
			major, _ := strconv.Atoi(strings.SplitN(nvcVersion(d, "driverVersion"), ".", 2)[0])
			switch {
			case major < 580 && has:
				t.Errorf("GPU %s: addressingMode %v published at driver %s (before R580, whose NVML has no such call)", d.Name, mode, nvcVersion(d, "driverVersion"))
			case major >= 580 && (!has || mode.StringValue == nil || !slices.Contains([]string{"HMM", "ATS", "None"}, *mode.StringValue)):
				t.Errorf("GPU %s: addressingMode %v at driver %s, want HMM, ATS or None", d.Name, mode, nvcVersion(d, "driverVersion"))
			}
			// NVIDIA's shareable device: memory with its request policy
			// (unlimited: default 0, 0 to all in 1Mi steps), the SM count as
			// an attribute (a capacity without a policy is taken whole).
			mem, ok := d.Capacity["memory"]
			p := mem.RequestPolicy
			if !ok || p == nil || p.Default == nil || !p.Default.IsZero() || p.ValidRange == nil || p.ValidRange.Min == nil || !p.ValidRange.Min.IsZero() ||
				p.ValidRange.Max == nil || p.ValidRange.Max.Cmp(mem.Value) != 0 || p.ValidRange.Step == nil || p.ValidRange.Step.Cmp(resource.MustParse("1Mi")) != 0 || mem.Value.Value()%(1<<20) != 0 {
				t.Errorf("GPU %s: memory capacity %+v, want NVIDIA's unlimited policy (default 0, 0 to all of it in 1Mi steps)", d.Name, mem)
			}
			if _, ok := d.Capacity["multiprocessors"]; ok {
				t.Errorf("GPU %s: multiprocessors is a capacity; a shareable GPU publishes it as an attribute", d.Name)
			}
			if a, ok := d.Attributes["multiprocessors"]; !ok || a.IntValue == nil || *a.IntValue <= 0 {
				t.Errorf("GPU %s: no multiprocessors attribute (%v)", d.Name, a)
			}
		}
		if t.Failed() {
			return
		}
		t.Logf("8 shareable GPUs, no MIG devices; driver %s, CUDA %s, %s; addressingMode %v",
			driver, nvcVersion(gpus[0], "cudaDriverVersion"), nvcStr(gpus[0], "productName"), gpus[0].Attributes["addressingMode"].StringValue)

		// NVIDIA's [cel/driverVersion]: its suite unpads the detected
		// version and asks for at least that one.
		unpadded := regexp.MustCompile(`(^|\.)0+(\d)`).ReplaceAllString(driver, "$1$2")
		sel := fmt.Sprintf("device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('%s')) >= 0", unpadded)
		applyYAML(t, nvcClaim("driver-version", "gpu.nvidia.com", sel, "")+"---\n"+claimPod("driver-version", nvcNS, "", "driver-version", map[string]string{"ctr": ""}))
		claims = append(claims, "driver-version")
		waitRunningIn(t, nvcNS, "driver-version")
		r := nvcAllocation(t, "driver-version")
		if d, ok := pool[r.Device]; !ok || nvcStr(d, "type") != "gpu" || r.ShareID == nil {
			t.Fatalf("claim by %q got %s (share %v), want a share of a GPU", sel, r.Device, r.ShareID)
		}
		nvcSeesGPU(t, "driver-version", pool[r.Device])
		t.Logf("claim by %q: a share of %s", sel, r.Device)
	})

	// shares runs two pods with a claim each of spec (memory: capacity
	// asked, "" for none) and checks they got shares of one GPU.
	shares := func(t *testing.T, a, b, memory string) {
		applyYAML(t, nvcClaim(a, "gpu.nvidia.com", "", memory)+"---\n"+nvcClaim(b, "gpu.nvidia.com", "", memory)+"---\n"+
			claimPod(a, nvcNS, "", a, map[string]string{"ctr": ""})+"---\n"+claimPod(b, nvcNS, "", b, map[string]string{"ctr": ""}))
		claims = append(claims, a, b)
		waitRunningIn(t, nvcNS, a, b)
		ra, rb := nvcAllocation(t, a), nvcAllocation(t, b)
		if ra.Device != rb.Device || ra.Pool != rb.Pool || ra.Pool != hostNode() {
			t.Fatalf("claims %s and %s got %s/%s and %s/%s, want shares of one GPU of %s", a, b, ra.Pool, ra.Device, rb.Pool, rb.Device, hostNode())
		}
		if ra.ShareID == nil || rb.ShareID == nil || *ra.ShareID == *rb.ShareID {
			t.Fatalf("claims %s and %s share IDs %v and %v, want two distinct shares", a, b, ra.ShareID, rb.ShareID)
		}
		want := resource.MustParse("0")
		if memory != "" {
			want = resource.MustParse(memory)
		}
		for _, r := range []resourceapi.DeviceRequestAllocationResult{ra, rb} {
			got, ok := r.ConsumedCapacity["memory"]
			if (ok || memory != "") && got.Cmp(want) != 0 {
				t.Errorf("share %s of %s consumed memory %v (recorded: %v), want %s", *r.ShareID, r.Device, got.String(), ok, want.String())
			}
		}
		d := pool[ra.Device]
		if nvcStr(d, "type") != "gpu" {
			t.Fatalf("the shares are of %s, not one of the pool's GPUs", ra.Device)
		}
		uuidA, uuidB := nvcSeesGPU(t, a, d), nvcSeesGPU(t, b, d)
		t.Logf("claims %s and %s (memory %q): shares %s and %s of %s; both pods see %s and %s", a, b, memory, *ra.ShareID, *rb.ShareID, ra.Device, uuidA, uuidB)
	}
	t.Run("ConsumableSharesUnlimited", func(t *testing.T) { shares(t, "unlimited-a", "unlimited-b", "") })
	t.Run("ConsumableSharesMemory", func(t *testing.T) { shares(t, "memory-a", "memory-b", "10Gi") })

	t.Run("Metrics", func(t *testing.T) {
		if len(claims) == 0 {
			t.Fatal("no pod ran")
		}
		// A memory share counts as a gpu device (docs/monitoring.md).
		nvcCheckAliases(t, map[string]float64{"gpu": float64(len(claims))})
	})

	// The default deploy, on a node with nothing of this deploy's left: a
	// share left prepared would hold a GPU that the default publishes whole.
	nvcDeleteAll(t)
	waitNodeClean(t, "after the consumable-shares pods and claims were deleted", nil)
	// Their unprepares, counted under both names.
	if n := nvcCheckAliases(t, nil)["unprepare"]; n < float64(len(claims)) {
		t.Errorf("nvidia_dra_requests_total{operation=\"unprepare\"} %v after %d claims were unprepared", n, len(claims))
	}
	nvcRestoreDefault(t)
	restored = true

	migRan := t.Run("MIGAttributes", nvcMIGAttributes)

	nvcDeleteAll(t)
	waitNodeClean(t, "after the MIG pods and claims were deleted", nil)
	if n := nvcCheckAliases(t, nil)["unprepare"]; migRan && n < 2 {
		t.Errorf("nvidia_dra_requests_total{operation=\"unprepare\"} %v after the 2 MIG claims were unprepared", n)
	}
}

// nvcClaim is a ResourceClaim for one device of class, picked by a CEL
// selector and asking for memory of its capacity (each when not empty).
func nvcClaim(name, class, selector, memory string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %s, namespace: %s}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: %s
`, name, nvcNS, class)
	if selector != "" {
		fmt.Fprintf(&b, "        selectors: [{cel: {expression: %q}}]\n", selector)
	}
	if memory != "" {
		fmt.Fprintf(&b, "        capacity: {requests: {memory: %s}}\n", memory)
	}
	return b.String()
}

// nvcAllocation is the one device a claim of the test's namespace was
// allocated (it fails unless the claim has exactly one).
func nvcAllocation(t *testing.T, claim string) resourceapi.DeviceRequestAllocationResult {
	t.Helper()
	c, err := client.ResourceV1().ResourceClaims(nvcNS).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s: allocation %+v, want one device", claim, c.Status.Allocation)
	}
	r := c.Status.Allocation.Devices.Results[0]
	if r.Driver != driverName {
		t.Fatalf("claim %s: device %s of driver %s", claim, r.Device, r.Driver)
	}
	return r
}

// nvcSeesGPU checks that the pod name's nvidia-smi shows the GPU d, and
// that the driver wrote d's UUID into the device status of its claim (of
// the same name). It returns the UUID.
func nvcSeesGPU(t *testing.T, name string, d resourceapi.Device) string {
	t.Helper()
	want := nvcStr(d, "uuid")
	if _, uuid, _ := gpuOfIn(t, nvcNS, name, "ctr"); uuid != want {
		t.Fatalf("pod %s sees GPU %s, want %s's %s", name, uuid, d.Name, want)
	}
	waitStatusUUIDs(t, nvcNS, name, func(m map[string]string) bool { return m[d.Name] == want })
	return want
}

// nvcPool is node 1's devices by name, when its pool is complete (every
// slice of its newest generation listed).
func nvcPool(t *testing.T) (map[string]resourceapi.Device, bool) {
	t.Helper()
	list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: node1Slices()})
	if err != nil {
		t.Fatal(err)
	}
	var gen int64
	for _, s := range list.Items {
		gen = max(gen, s.Spec.Pool.Generation)
	}
	devs := map[string]resourceapi.Device{}
	var n, want int64
	for _, s := range list.Items {
		if s.Spec.Pool.Generation != gen {
			continue
		}
		n, want = n+1, s.Spec.Pool.ResourceSliceCount
		for _, d := range s.Spec.Devices {
			devs[d.Name] = d
		}
	}
	return devs, n > 0 && n == want
}

// nvcOfType lists the pool's devices of a type attribute, by name.
func nvcOfType(pool map[string]resourceapi.Device, typ string) []resourceapi.Device {
	var out []resourceapi.Device
	for _, d := range pool {
		if nvcStr(d, "type") == typ {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func nvcStr(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func nvcVersion(d resourceapi.Device, name resourceapi.QualifiedName) string {
	if a, ok := d.Attributes[name]; ok && a.VersionValue != nil {
		return *a.VersionValue
	}
	return ""
}

// nvcDeleteAll deletes the test namespace's pods and claims and waits for
// them to be gone.
func nvcDeleteAll(t *testing.T) {
	t.Helper()
	kubectl(t, "delete", "pods,resourceclaims", "--all", "-n", nvcNS, "--wait=true", "--timeout=120s")
}
