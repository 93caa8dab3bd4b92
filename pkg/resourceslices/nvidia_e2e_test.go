// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package resourceslices_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// suiteGPU is what NVIDIA's Ginkgo e2e suite (test/e2e of
// kubernetes-sigs/dra-driver-nvidia-gpu, 95932046) reads from the first
// device of the first gpu.nvidia.com ResourceSlice the API lists before it
// runs any spec, and builds its selectors from.
type suiteGPU struct {
	product, driver string
	memGi           int64
}

// detectLikeTheSuite reads a device as the suite does: productName must be
// set (it stops otherwise), driverVersion is a version attribute with any
// zero-padded part unpadded, memory a capacity.
func detectLikeTheSuite(t *testing.T, slice string, d resourceapi.Device) suiteGPU {
	t.Helper()
	var g suiteGPU
	if a := d.Attributes["productName"]; a.StringValue != nil {
		g.product = *a.StringValue
	}
	if a := d.Attributes["driverVersion"]; a.VersionValue != nil {
		g.driver = regexp.MustCompile(`(^|\.)0+(\d)`).ReplaceAllString(*a.VersionValue, "$1$2")
	}
	if c, ok := d.Capacity["memory"]; ok {
		g.memGi = c.Value.Value() >> 30
	}
	if g.product == "" || g.driver == "" || g.memGi == 0 {
		t.Fatalf("slice %s starts with %s: productName %q, driverVersion %q, memory %dGi; NVIDIA's suite needs all three", slice, d.Name, g.product, g.driver, g.memGi)
	}
	return g
}

// suiteProductPattern is the pattern the suite's [cel/productName] spec
// builds from a detected product name (its LowerKebab).
func suiteProductPattern(product string) string {
	return strings.ToLower(strings.ReplaceAll(product, "-", " "))
}

// productNameSelector is the spec's selector for a pattern.
func productNameSelector(pattern string) string {
	return fmt.Sprintf("device.attributes['%s'].productName.lowerAscii().matches('^.*%s.*$')", driverName, pattern)
}

// chartDefaultOptions are the chart's defaults as hack/cluster/deploy.sh installs them.
var chartDefaultOptions = resourceslices.Options{DynamicMIG: true, FractionalMemory: true, FractionalGPUs: []int{7}}

// TestNVIDIAE2ESuiteSelectors holds in CI what NVIDIA's Ginkgo e2e suite
// checks of the published devices and the scheduler (hack/nvidia-e2e.sh
// runs the suite itself on the local cluster; its source is not here). For
// the chart's default layout and for docs/examples/consumable-shares.yaml
// (unlimited shares on every GPU): whichever slice the API lists first,
// its first device gives the suite a product name, a driver version and a
// memory size ([install]); a claim by product name (lowercased, as a
// regular expression), by driverVersion >= the detected one (semver) and
// by memory >= 90% of the detected one each allocate a GPU ([cel/...]);
// two GPUs named "h300" allocate nothing ([negative]). With consumable
// shares, two claims of no capacity, and two of 2Gi of memory, land on the
// same GPU ([consumable-shares/unlimited], [consumable-shares/memory]).
// [sharing] (one claim reserved for four pods) is the apiserver's and the
// kubelet's, held by test/e2e TestDriver/SharedClaims.
func TestNVIDIAE2ESuiteSelectors(t *testing.T) {
	// A driver version with a zero-padded part, as NVIDIA's drivers have
	// (580.105.08): the suite unpads it before semver() reads it.
	_, inv := simulatedNodeOn(t, "h100x8", "580.105.08", r580Cuda)
	attr := func(name string) string { return fmt.Sprintf("device.attributes['%s'].%s", driverName, name) }
	for _, tc := range []struct {
		name   string
		opts   resourceslices.Options
		shares bool
	}{
		{"default", chartDefaultOptions, false},
		{"consumable-shares.yaml", resourceslices.Options{DynamicMIG: true, ConsumableShares: resourceslices.ConsumableShares{Mode: resourceslices.SharesUnlimited, Count: resourceslices.DefaultShareCount}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := resourceslices.Build("n1", inv, tc.opts)
			if err := resourceslices.Validate(res); err != nil {
				t.Fatal(err)
			}
			var g suiteGPU
			for i, s := range res.Pools["n1"].Slices {
				if len(s.Devices) == 0 {
					continue // the suite looks past a slice of counters only
				}
				g = detectLikeTheSuite(t, fmt.Sprint(i), s.Devices[0])
			}
			if g.driver != "580.105.8" {
				t.Fatalf("driver version %q as the suite reads it, want 580.105.8", g.driver)
			}
			c := schedtest.New(t, driverName, "n1", res)
			for name, sel := range map[string]string{
				"cel/productName":   productNameSelector(suiteProductPattern(g.product)),
				"cel/driverVersion": fmt.Sprintf("%s.compareTo(semver('%s')) >= 0", attr("driverVersion"), g.driver),
				"cel/memory":        fmt.Sprintf("device.capacity['%s'].memory.compareTo(quantity('%dGi')) >= 0", driverName, g.memGi*9/10),
			} {
				if got := schedtest.Devices(c.Allocate(schedtest.Claim(name, schedtest.Request("gpu", "gpu.nvidia.com", 1, sel)))); len(got) != 1 {
					t.Errorf("%s: allocated %v, want one GPU", name, got)
				}
			}
			h300 := schedtest.Request("gpu", "gpu.nvidia.com", 2, productNameSelector("h300"))
			if got := c.Allocate(schedtest.Claim("negative", h300)); got != nil {
				t.Errorf("negative: h300 allocated %v", schedtest.Devices(got))
			}
			if !tc.shares {
				return
			}
			for _, req := range []resourceapi.DeviceRequest{
				schedtest.Request("gpu", "gpu.nvidia.com", 1),
				schedtest.WithCapacity(schedtest.Request("gpu", "gpu.nvidia.com", 1), map[resourceapi.QualifiedName]string{"memory": "2Gi"}),
			} {
				var devs []string
				for i := 0; i < 2; i++ {
					devs = append(devs, schedtest.Devices(c.Allocate(schedtest.Claim(fmt.Sprintf("share-%d", i), req)))...)
				}
				if len(devs) != 2 || devs[0] != devs[1] {
					t.Errorf("two shares (capacity %v) on %v, want one GPU", req.Exactly.Capacity, devs)
				}
			}
		})
	}
}

// TestNVIDIAE2ESuiteProductPatternOnDashedNames holds why NVIDIA's
// [cel/productName] spec passes on an H100 and cannot on an A100, whichever
// driver publishes the GPU. The spec matches the detected productName,
// lowercased and with each '-' turned into ' ' (its LowerKebab, written for
// NFD label values such as "Tesla-T4"), against the attribute lowercased
// only. The attribute is NVML's device name, as nvidia-smi -L prints it and
// as NVIDIA's plugin publishes it (cmd/gpu-kubelet-plugin/nvlib.go,
// device.GetName()): "NVIDIA A100-SXM4-80GB" keeps its dashes, so the
// pattern "nvidia a100 sxm4 80gb" matches no device and the pod stays
// Pending. NVIDIA's CI runs the suite on a Tesla T4 (no dash). The
// attribute stays NVML's name: users' selectors match what nvidia-smi
// shows, and rewriting it to suit one test would break them.
func TestNVIDIAE2ESuiteProductPatternOnDashedNames(t *testing.T) {
	for _, tc := range []struct {
		profile, nvmlName string
		suiteMatches      bool
	}{
		{"h100x8", "NVIDIA H100 80GB HBM3", true},
		// The local cluster's second node (hack/cluster/deploy.sh's EXTRA_NODE_PROFILE).
		{"a100-80gbx4", "NVIDIA A100-SXM4-80GB", false},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			_, inv := simulatedNodeOn(t, tc.profile, "580.105.08", r580Cuda)
			res := resourceslices.Build("n1", inv, chartDefaultOptions)
			var g suiteGPU
			for i, s := range res.Pools["n1"].Slices {
				if len(s.Devices) > 0 {
					g = detectLikeTheSuite(t, fmt.Sprint(i), s.Devices[0])
					break
				}
			}
			if g.product != tc.nvmlName {
				t.Fatalf("productName %q, want NVML's device name %q unchanged", g.product, tc.nvmlName)
			}
			c := schedtest.New(t, driverName, "n1", res)
			allocates := func(pattern string) bool {
				req := schedtest.Request("gpu", "gpu.nvidia.com", 1, productNameSelector(pattern))
				return len(schedtest.Devices(c.Allocate(schedtest.Claim("by-product", req)))) == 1
			}
			if got := allocates(suiteProductPattern(g.product)); got != tc.suiteMatches {
				t.Errorf("the suite's pattern for %q allocates: %v, want %v", g.product, got, tc.suiteMatches)
			}
			if !allocates(regexp.QuoteMeta(strings.ToLower(g.product))) {
				t.Errorf("the name lowercased, dashes kept, allocates nothing")
			}
		})
	}
}
