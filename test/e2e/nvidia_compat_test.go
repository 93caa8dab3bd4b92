// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
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

	migRan := t.Run("MIGAttributes", func(t *testing.T) {
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
	})

	nvcDeleteAll(t)
	waitNodeClean(t, "after the MIG pods and claims were deleted", nil)
	if n := nvcCheckAliases(t, nil)["unprepare"]; migRan && n < 2 {
		t.Errorf("nvidia_dra_requests_total{operation=\"unprepare\"} %v after the 2 MIG claims were unprepared", n)
	}
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

// nvcDeleteAll deletes the test namespace's pods and claims and waits for
// them to be gone.
func nvcDeleteAll(t *testing.T) {
	t.Helper()
	kubectl(t, "delete", "pods,resourceclaims", "--all", "-n", nvcNS, "--wait=true", "--timeout=120s")
}

// nvcScrape reads node 1's plugin /metrics, on the port of its probes
// (kubeletPlugin.metricsPort), from its pod IP (the plugin runs on the host
// network here, as hack/cluster/deploy.sh installs it).
func nvcScrape(t *testing.T) (map[string]*dto.MetricFamily, error) {
	t.Helper()
	p := pluginPod(t)
	probe := p.Spec.Containers[0].LivenessProbe
	if probe == nil || probe.HTTPGet == nil {
		t.Fatal("the plugin has no HTTP liveness probe")
	}
	url := fmt.Sprintf("http://%s:%d/metrics", p.Status.PodIP, probe.HTTPGet.Port.IntValue())
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %d %v", url, resp.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(string(body)))
}

func nvcLabels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// nvcCheckAliases checks, in one scrape, what docs/monitoring.md promises
// of NVIDIA's names: nvidia_dra_prepared_devices is gpu_dra_prepared_devices
// by device type (gpu, mig, vfio, unknown; zeros exported) labelled with
// node 1 and the driver, and want gives each type's count (0 when
// missing); nvidia_dra_requests_total and nvidia_dra_request_duration_seconds
// are the counts and buckets of gpu_dra_{prepare,unprepare}_duration_seconds;
// nvidia_dra_node_{prepare,unprepare}_errors_total are
// gpu_dra_errors_total{operation=prepare,unprepare}. A scrape may fall
// between two collectors of a prepare in flight, so it is retried a while.
// It returns the requests counted, by operation.
func nvcCheckAliases(t *testing.T, want map[string]float64) map[string]float64 {
	t.Helper()
	var report string
	var requests map[string]float64
	waitFor(t, "nvidia_dra_* series equal to the plugin's own", 30*time.Second, func() (bool, string) {
		fams, err := nvcScrape(t)
		if err != nil {
			return false, err.Error()
		}
		var bad []string
		fam := func(name string, typ dto.MetricType) []*dto.Metric {
			f := fams[name]
			if f == nil {
				bad = append(bad, name+" missing")
				return nil
			}
			if f.GetType() != typ {
				bad = append(bad, fmt.Sprintf("%s is a %s, want a %s", name, f.GetType(), typ))
			}
			return f.Metric
		}
		var lines []string

		// Prepared devices.
		ours := fam("gpu_dra_prepared_devices", dto.MetricType_GAUGE)
		if len(ours) != 1 {
			bad = append(bad, fmt.Sprintf("%d gpu_dra_prepared_devices series, want 1", len(ours)))
			return false, strings.Join(bad, "; ")
		}
		total, sum := ours[0].GetGauge().GetValue(), 0.0
		byType := map[string]float64{}
		for _, m := range fam("nvidia_dra_prepared_devices", dto.MetricType_GAUGE) {
			l := nvcLabels(m)
			if l["node"] != hostNode() || l["driver"] != driverName || len(l) != 3 {
				bad = append(bad, fmt.Sprintf("nvidia_dra_prepared_devices labels %v, want node %s, driver %s, device_type", l, hostNode(), driverName))
			}
			byType[l["device_type"]] = m.GetGauge().GetValue()
			sum += m.GetGauge().GetValue()
		}
		for _, typ := range []string{"gpu", "mig", "vfio", "unknown"} {
			if v, ok := byType[typ]; !ok || v != want[typ] {
				bad = append(bad, fmt.Sprintf("nvidia_dra_prepared_devices{device_type=%q} %v (exported: %v), want %v", typ, v, ok, want[typ]))
			}
		}
		if len(byType) != 4 || sum != total {
			bad = append(bad, fmt.Sprintf("nvidia_dra_prepared_devices %v sum to %v, gpu_dra_prepared_devices is %v", byType, sum, total))
		}
		lines = append(lines, fmt.Sprintf("gpu_dra_prepared_devices %v = nvidia_dra_prepared_devices %v", total, byType))

		// Requests and their durations, by operation.
		durations := map[string]*dto.Histogram{}
		requests = map[string]float64{}
		for _, m := range fam("nvidia_dra_requests_total", dto.MetricType_COUNTER) {
			l := nvcLabels(m)
			if l["driver"] != driverName {
				bad = append(bad, fmt.Sprintf("nvidia_dra_requests_total labels %v", l))
			}
			requests[l["operation"]] = m.GetCounter().GetValue()
		}
		for _, m := range fam("nvidia_dra_request_duration_seconds", dto.MetricType_HISTOGRAM) {
			l := nvcLabels(m)
			if l["driver"] != driverName {
				bad = append(bad, fmt.Sprintf("nvidia_dra_request_duration_seconds labels %v", l))
			}
			durations[l["operation"]] = m.GetHistogram()
		}
		for _, op := range []string{"prepare", "unprepare"} {
			ms := fam("gpu_dra_"+op+"_duration_seconds", dto.MetricType_HISTOGRAM)
			if len(ms) != 1 {
				bad = append(bad, fmt.Sprintf("%d gpu_dra_%s_duration_seconds series", len(ms), op))
				continue
			}
			h := ms[0].GetHistogram()
			if v, ok := requests[op]; !ok || v != float64(h.GetSampleCount()) {
				bad = append(bad, fmt.Sprintf("nvidia_dra_requests_total{operation=%q} %v (exported: %v), gpu_dra_%s_duration_seconds_count %d", op, v, ok, op, h.GetSampleCount()))
			}
			n := durations[op]
			if n == nil || n.GetSampleCount() != h.GetSampleCount() || n.GetSampleSum() != h.GetSampleSum() || fmt.Sprint(nvcBuckets(n)) != fmt.Sprint(nvcBuckets(h)) {
				bad = append(bad, fmt.Sprintf("nvidia_dra_request_duration_seconds{operation=%q} count %d sum %v buckets %v; gpu_dra_%s_duration_seconds count %d sum %v buckets %v",
					op, n.GetSampleCount(), n.GetSampleSum(), nvcBuckets(n), op, h.GetSampleCount(), h.GetSampleSum(), nvcBuckets(h)))
			}
			lines = append(lines, fmt.Sprintf("%s: %d requests", op, h.GetSampleCount()))
		}

		// Errors.
		errs := map[string]float64{}
		for _, m := range fam("gpu_dra_errors_total", dto.MetricType_COUNTER) {
			errs[nvcLabels(m)["operation"]] = m.GetCounter().GetValue()
		}
		for _, op := range []string{"prepare", "unprepare"} {
			ms := fam("nvidia_dra_node_"+op+"_errors_total", dto.MetricType_COUNTER)
			ourErrs, ok := errs[op]
			if len(ms) != 1 || !ok {
				bad = append(bad, fmt.Sprintf("%d nvidia_dra_node_%s_errors_total series; gpu_dra_errors_total{operation=%q} exported: %v", len(ms), op, op, ok))
				continue
			}
			l := nvcLabels(ms[0])
			if l["driver"] != driverName || l["error_type"] != op+"_devices" || len(l) != 2 || ms[0].GetCounter().GetValue() != ourErrs {
				bad = append(bad, fmt.Sprintf("nvidia_dra_node_%s_errors_total%v %v, gpu_dra_errors_total{operation=%q} %v", op, l, ms[0].GetCounter().GetValue(), op, ourErrs))
			}
			lines = append(lines, fmt.Sprintf("%s errors %v", op, ourErrs))
		}
		report = strings.Join(lines, "; ")
		return len(bad) == 0, strings.Join(bad, "; ")
	})
	t.Logf("NVIDIA's names agree with ours: %s", report)
	return requests
}

// nvcBuckets is a histogram's cumulative counts by upper bound.
func nvcBuckets(h *dto.Histogram) []string {
	var out []string
	for _, b := range h.GetBucket() {
		out = append(out, fmt.Sprintf("%g:%d", b.GetUpperBound(), b.GetCumulativeCount()))
	}
	return out
}
