// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/devicestatus"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// TestPrintSlices runs the command as a user would and checks its output
// against the API's limits and naming rules.
func TestPrintSlices(t *testing.T) {
	for _, tc := range []struct {
		profile, model string
		gpus           int
		memory         string
		dynamicMIG     bool
		migDevices     int
	}{
		{"h100x8", "NVIDIA H100 80GB HBM3", 8, "80Gi", false, 0},
		{"a100-40gbx8", "NVIDIA A100-SXM4-40GB", 8, "40Gi", false, 0},
		{"h100x8", "NVIDIA H100 80GB HBM3", 8, "80Gi", true, 8 * 25},
		// An A100 changes MIG mode only with a reset: with MIG mode off it
		// is offered whole only.
		{"a100-80gbx8", "NVIDIA A100-SXM4-80GB", 8, "80Gi", true, 0},
	} {
		t.Run(fmt.Sprintf("%s/dynamic-mig=%v", tc.profile, tc.dynamicMIG), func(t *testing.T) {
			cmd := newCommand()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetArgs([]string{"--simulate", tc.profile, "--node-name", "n1", "--print-slices", fmt.Sprintf("--feature-gates=DynamicMIG=%v", tc.dynamicMIG)})
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			pool := resourceslice.Pool{}
			uuids := map[string]bool{}
			parents := map[string]int{}
			for _, doc := range strings.Split(out.String(), "---\n") {
				if strings.TrimSpace(doc) == "" {
					continue
				}
				var s resourceapi.ResourceSlice
				if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
					t.Fatalf("output is not a ResourceSlice: %v\n%s", err, doc)
				}
				if s.Spec.Driver != "gpu.nvidia.com" || s.Spec.NodeName == nil || *s.Spec.NodeName != "n1" || s.Spec.Pool.Name != "n1" {
					t.Fatalf("slice spec header wrong: %+v", s.Spec.Pool)
				}
				for _, d := range s.Spec.Devices {
					if *d.Attributes["productName"].StringValue != tc.model {
						t.Errorf("%s: productName %q", d.Name, *d.Attributes["productName"].StringValue)
					}
					if *d.Attributes["type"].StringValue == "mig" {
						parents[*d.Attributes["parentUUID"].StringValue]++
						continue
					}
					if got := d.Capacity["memory"].Value; got.String() != tc.memory {
						t.Errorf("%s: memory %s, want %s", d.Name, got.String(), tc.memory)
					}
					uuids[*d.Attributes["uuid"].StringValue] = true
				}
				pool.Slices = append(pool.Slices, resourceslice.Slice{Devices: s.Spec.Devices, SharedCounters: s.Spec.SharedCounters})
			}
			if len(uuids) != tc.gpus {
				t.Fatalf("want %d distinct GPUs, got %d", tc.gpus, len(uuids))
			}
			migs := 0
			for parent, n := range parents {
				if !uuids[parent] {
					t.Errorf("MIG devices name unknown parent %s", parent)
				}
				migs += n
			}
			if migs != tc.migDevices {
				t.Errorf("%d MIG devices published, want %d", migs, tc.migDevices)
			}
			t.Logf("%s: %d devices in %d slices", tc.profile, tc.gpus+migs, len(pool.Slices))
			if err := resourceslices.Validate(resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{"n1": pool}}); err != nil {
				t.Fatalf("printed slices break API rules: %v", err)
			}
		})
	}
}

func TestPrintSlicesIsStable(t *testing.T) {
	run := func(node string) string {
		cmd := newCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"--simulate", "h100x2", "--node-name", node, "--print-slices"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if a, b := run("n1"), run("n1"); a != b {
		t.Fatal("two runs for the same node published different devices")
	}
	if a, b := run("n1"), run("n2"); a == b {
		t.Fatal("two nodes got identical GPU UUIDs")
	}
}

func TestBadFlagsSayWhatToFix(t *testing.T) {
	for args, want := range map[string]string{
		"--simulate h100x8 --print-slices":                                                       "--node-name is required",
		"--simulate h900x8 --node-name n1 --print-slices":                                        `unknown model "h900"`,
		"--simulate h100x0 --node-name n1 --print-slices":                                        "must be a number from 1 to 64",
		"--driver-root /nonexistent --node-name n1 --print-slices":                               "--driver-root",
		"--simulate h100x1 --node-name n1 --health-taint-effect PreferNoSchedule --print-slices": "--health-taint-effect",
		"--simulate h100x1 --node-name n1 --health-ignored-xids 13,x --print-slices":             "--health-ignored-xids",
		"--simulate h100x1 --node-name n1 --nvml-retry-interval 0 --print-slices":                "--nvml-retry-interval",
		"--simulate h100x1 --node-name n1 --nvml-retry-max-interval 10ms --print-slices":         "--nvml-retry-max-interval",
	} {
		cmd := newCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetArgs(strings.Fields(args))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", args, err, want)
		}
	}
}

// TestPrintSlicesFractionalPreview shows a shareable GPU with its request policy.
func TestPrintSlicesFractionalPreview(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--simulate", "h100x1", "--node-name", "n1", "--fractional-memory", "--print-slices"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	var s resourceapi.ResourceSlice
	if err := yaml.UnmarshalStrict([]byte(strings.TrimPrefix(out.String(), "---\n")), &s); err != nil {
		t.Fatal(err)
	}
	// The GPU, and its monitor device (admin access only).
	if len(s.Spec.Devices) != 2 || s.Spec.Devices[1].Name != "gpu-0-monitor" {
		t.Fatalf("want gpu-0 and gpu-0-monitor:\n%s", out.String())
	}
	d := s.Spec.Devices[0]
	mem := d.Capacity["memory"]
	if d.AllowMultipleAllocations == nil || !*d.AllowMultipleAllocations || mem.RequestPolicy == nil || mem.RequestPolicy.ValidRange == nil {
		t.Fatalf("shareable device not published as such:\n%s", out.String())
	}
	if step := mem.RequestPolicy.ValidRange.Step; step == nil || step.String() != "1Gi" {
		t.Fatalf("memory step %v", step)
	}
	if _, ok := d.Capacity["computePercentage"]; !ok {
		t.Fatal("no computePercentage capacity")
	}
}

// TestStatusWritesHaveOwnRateLimiter: the kubelet plugin helper GETs the
// claim inside every prepare with the plugin's client. Device-status writes
// go through a client of their own, so a burst of them does not make those
// GETs wait for rate-limiter tokens. With one limiter for both (as at
// fa0e289), the three GETs below would wait about 2 s each.
func TestStatusWritesHaveOwnRateLimiter(t *testing.T) {
	var mu sync.Mutex
	var patches int
	agents := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents[r.Method] = r.UserAgent()
		if r.Method == http.MethodPatch {
			patches++
		}
		mu.Unlock()
		name := path.Base(strings.TrimSuffix(r.URL.Path, "/status"))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&resourceapi.ResourceClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		})
	}))
	defer srv.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: srv.URL}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {}},
		Contexts:       map[string]*clientcmdapi.Context{"c": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "c",
	}, kubeconfig); err != nil {
		t.Fatal(err)
	}
	// Three tokens each, then one every two seconds.
	client, statusClient, err := newClients(&options{kubeconfig: kubeconfig, kubeAPIQPS: 0.5, kubeAPIBurst: 3, statusQPS: 0.5, statusBurst: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := devicestatus.New(ctx, statusClient, "gpu.nvidia.com", devicestatus.Options{})
	defer func() { cancel(); <-w.Done }()
	for i := range 3 {
		name := fmt.Sprintf("c%d", i)
		w.Prepared(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}},
			[]checkpoint.PreparedDevice{{Pool: "n1", Device: fmt.Sprintf("gpu-%d", i), UUID: "GPU-x"}})
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		mu.Lock()
		n := patches
		mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 status writes arrived", n)
		}
	}
	begin := time.Now()
	for i := range 3 {
		if _, err := client.ResourceV1().ResourceClaims("default").Get(ctx, fmt.Sprintf("c%d", i), metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(begin); d > time.Second {
		t.Fatalf("3 claim GETs after 3 status writes took %v: they waited for the status writes' rate limiter", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if agents[http.MethodGet] != "gpu-kubelet-plugin" || agents[http.MethodPatch] != "gpu-kubelet-plugin/device-status" {
		t.Errorf("user agents %v: the status writes should say who they are", agents)
	}
}

// TestStatusClientFlags: the status writes' limits are flags with
// documented defaults.
func TestStatusClientFlags(t *testing.T) {
	f := newCommand().Flags()
	for name, want := range map[string]string{"status-api-qps": "50", "status-api-burst": "100", "kube-api-qps": "50", "kube-api-burst": "100"} {
		if fl := f.Lookup(name); fl == nil || fl.DefValue != want {
			t.Errorf("--%s: %+v, want default %s", name, fl, want)
		}
	}
}
