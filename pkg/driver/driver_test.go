// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// inject applies CDI devices to an empty OCI spec the way containerd does.
func inject(t *testing.T, cdiDir string, ids ...string) *oci.Spec {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("CDI specs do not parse: %v", errs)
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("inject %v (unresolved %v): %v", ids, unresolved, err)
	}
	return spec
}

func mountTargets(s *oci.Spec) []string {
	var out []string
	for _, m := range s.Mounts {
		out = append(out, m.Destination)
	}
	return out
}

func TestPrepareExposesExactlyTheClaimedGPUs(t *testing.T) {
	n := newNode(t, "h100x8")
	claim := n.claim("two", []string{"gpu-3", "gpu-5"})
	ids := n.mustPrepare(claim)
	if len(ids) != 2 {
		t.Fatalf("want 2 CDI IDs, got %v", ids)
	}
	spec := inject(t, n.dir("cdi"), ids...)
	mounts := mountTargets(spec)
	for _, want := range []string{"/dev/nvidia3", "/dev/nvidia5", "/dev/nvidiactl"} {
		if !slices.Contains(mounts, want) {
			t.Errorf("container lacks %s; mounts %v", want, mounts)
		}
	}
	for _, unwanted := range []string{"/dev/nvidia0", "/dev/nvidia4"} {
		if slices.Contains(mounts, unwanted) {
			t.Errorf("container got unclaimed %s", unwanted)
		}
	}
	gpus := n.driver.cfg.Backend.Inventory.GPUs
	wantEnv := "NVIDIA_VISIBLE_DEVICES=" + gpus[3].UUID + "," + gpus[5].UUID
	if !slices.Contains(spec.Process.Env, wantEnv) {
		t.Errorf("env %v lacks %s", spec.Process.Env, wantEnv)
	}
	// The mounted file is the simulated device of that very GPU.
	for _, m := range spec.Mounts {
		if m.Destination == "/dev/nvidia3" {
			data, err := os.ReadFile(m.Source)
			if err != nil || !strings.HasPrefix(string(data), gpus[3].UUID) {
				t.Errorf("/dev/nvidia3 comes from %s holding %q", m.Source, data)
			}
		}
	}

	// Idempotent: the kubelet may ask again after a restart.
	if again := n.mustPrepare(claim); !slices.Equal(again, ids) {
		t.Fatalf("second prepare returned %v, first %v", again, ids)
	}

	// Device status reaches the claim in the background.
	waitFor(t, "device status", func() bool {
		c, err := n.client.ResourceV1().ResourceClaims("default").Get(context.Background(), "two", metav1.GetOptions{})
		if err != nil || len(c.Status.Devices) != 2 {
			return false
		}
		var data configapi.DeviceStatusData
		_ = json.Unmarshal(c.Status.Devices[0].Data.Raw, &data)
		return data.UUID == gpus[3].UUID && data.ProductName == "NVIDIA H100 80GB HBM3"
	})

	n.unprepare(claim)
	if _, err := os.Stat(n.specPath(claim)); !os.IsNotExist(err) {
		t.Fatalf("CDI spec left after unprepare: %v", err)
	}
	if files := n.checkpointFiles(); len(files) != 0 {
		t.Fatalf("checkpoint not empty after unprepare: %v", files)
	}
	n.unprepare(claim) // idempotent
}

func TestInvalidConfigFailsOnlyThatClaim(t *testing.T) {
	n := newNode(t, "h100x8")
	good := n.claim("good", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`)
	unknown := n.claim("unknown-field", []string{"gpu-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","bogus":1}}`)
	wrongKind := n.claim("wrong-kind", []string{"gpu-2"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig"}`)
	badInterval := n.claim("bad-interval", []string{"gpu-4"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Forever"}}}`)

	res := n.prepare(good, unknown, wrongKind, badInterval)
	if r := res[string(good.UID)]; r.Error != "" || len(r.Devices) != 1 {
		t.Fatalf("good claim failed: %+v", r)
	}
	for claim, want := range map[string]string{
		string(unknown.UID):     `unknown field "sharing.bogus"`,
		string(wrongKind.UID):   "use kind GpuConfig",
		string(badInterval.UID): "sharing.timeSlicingConfig.interval",
	} {
		if r := res[claim]; !strings.Contains(r.GetError(), want) {
			t.Errorf("claim %s: error %q does not mention %q", claim, r.GetError(), want)
		}
	}
	// The failed claims left nothing behind, and their GPUs are free.
	for _, c := range []string{"unknown-field", "wrong-kind", "bad-interval"} {
		if _, err := os.Stat(n.specPath(n.claimObj(c))); !os.IsNotExist(err) {
			t.Errorf("failed claim %s left a CDI spec", c)
		}
	}
	if files := n.checkpointFiles(); len(files) != 1 {
		t.Errorf("want only the good claim checkpointed, got %v", files)
	}
	n.mustPrepare(n.claim("reuse", []string{"gpu-1"}))
}

func TestDeviceHeldByAnotherClaimIsRefused(t *testing.T) {
	n := newNode(t, "h100x8")
	n.mustPrepare(n.claim("first", []string{"gpu-0"}))
	r := n.prepare(n.claim("second", []string{"gpu-0"}))["uid-second"]
	if !strings.Contains(r.GetError(), "already prepared for claim uid-first") {
		t.Fatalf("second claim on gpu-0: %+v", r)
	}
}

func TestRestartedPluginKnowsItsClaims(t *testing.T) {
	n := newNode(t, "h100x8")
	claim := n.claim("keep", []string{"gpu-2"})
	ids := n.mustPrepare(claim)
	n.restart("h100x8")
	n.requireStillPrepared(claim, ids, "gpu-2")
}

func TestRestartUnpreparesDeletedAndReplacedClaims(t *testing.T) {
	n := newNode(t, "h100x8")
	gone := n.claim("gone", []string{"gpu-0"})
	replaced := n.claim("replaced", []string{"gpu-1"})
	kept := n.claim("kept", []string{"gpu-2"})
	for _, c := range []string{"gone", "replaced", "kept"} {
		n.mustPrepare(n.claimObj(c))
	}
	n.stop()
	ctx := context.Background()
	claims := n.client.ResourceV1().ResourceClaims("default")
	if err := claims.Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := claims.Delete(ctx, "replaced", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	newer := replaced.DeepCopy()
	newer.UID, newer.ResourceVersion = "uid-replaced-2", ""
	if _, err := claims.Create(ctx, newer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.start("h100x8")
	for _, c := range []struct {
		path string
		want bool
	}{{n.specPath(gone), false}, {n.specPath(replaced), false}, {n.specPath(kept), true}} {
		if _, err := os.Stat(c.path); (err == nil) != c.want {
			t.Errorf("%s exists=%v, want %v", c.path, err == nil, c.want)
		}
	}
	if files := n.checkpointFiles(); len(files) != 1 {
		t.Errorf("want one checkpointed claim, got %v", files)
	}
}

func TestCorruptCheckpointIsRecoveredFromCDISpecs(t *testing.T) {
	n := newNode(t, "h100x8")
	claim := n.claim("survivor", []string{"gpu-6"})
	ids := n.mustPrepare(claim)
	n.stop()
	files := n.checkpointFiles()
	if len(files) != 1 {
		t.Fatalf("checkpoint files %v", files)
	}
	if err := os.WriteFile(files[0], []byte("\x00\x00garbage{"), 0o600); err != nil {
		t.Fatal(err)
	}
	n.start("h100x8")
	n.requireStillPrepared(claim, ids, "gpu-6")
}

func TestInterruptedPrepareIsRolledBack(t *testing.T) {
	n := newNode(t, "h100x8")
	claim := n.claim("half", []string{"gpu-7"})
	n.mustPrepare(claim)
	n.stop()
	// Rewrite the record as if the plugin died before completing.
	files := n.checkpointFiles()
	data, _ := os.ReadFile(files[0])
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	if err := n.writeStartedRecord(claim); err != nil {
		t.Fatal(err)
	}
	n.start("h100x8")
	if _, err := os.Stat(n.specPath(claim)); !os.IsNotExist(err) {
		t.Fatal("interrupted prepare's CDI spec was not rolled back")
	}
	if files := n.checkpointFiles(); len(files) != 0 {
		t.Fatalf("interrupted prepare's record kept: %v", files)
	}
	n.mustPrepare(claim)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMetricsAndLiveness(t *testing.T) {
	n := newNode(t, "h100x8")
	n.mustPrepare(n.claim("m", []string{"gpu-0"}))
	n.prepare(n.claim("bad", []string{"gpu-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"Nope"}`))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := n.driver.cfg.Metrics.Serve(ctx, "127.0.0.1:0", n.driver.Live, n.driver.Ready)
	if err != nil {
		t.Fatal(err)
	}
	body := httpGet(t, "http://"+addr.String()+"/metrics")
	for _, want := range []string{
		"gpu_dra_prepare_duration_seconds_count 2",
		`gpu_dra_errors_total{operation="prepare"} 1`,
		"gpu_dra_prepared_devices 1",
		// NVIDIA's names of the same series (pkg/metrics nvidia.go).
		`nvidia_dra_requests_total{driver="gpu.nvidia.com",operation="prepare"} 2`,
		`nvidia_dra_node_prepare_errors_total{driver="gpu.nvidia.com",error_type="prepare_devices"} 1`,
		`nvidia_dra_prepared_devices{device_type="gpu",driver="gpu.nvidia.com",node="` + n.driver.cfg.NodeName + `"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if got := httpGet(t, "http://"+addr.String()+"/healthz"); got != "ok\n" {
		t.Errorf("/healthz = %q", got)
	}
	waitFor(t, "/readyz ok once the health monitor watches events", func() bool {
		return httpGet(t, "http://"+addr.String()+"/readyz") == "ok\n"
	})
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}
