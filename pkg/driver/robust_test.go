// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/testwait"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/devicestatus"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func pbRequest(c *resourceapi.ResourceClaim) *drapb.NodePrepareResourcesRequest {
	return &drapb.NodePrepareResourcesRequest{Claims: pbClaims(c)}
}

// prepareWithin fails the test instead of hanging when prepare does not
// answer (the kubelet's own timeout is minutes).
func (n *node) prepareWithin(c *resourceapi.ResourceClaim) string {
	n.t.Helper()
	done := make(chan string, 1)
	go func() {
		ctx, cancel := contextWithTimeout(5 * time.Second)
		defer cancel()
		resp, err := n.kubelet.NodePrepareResources(ctx, pbRequest(c))
		if err != nil {
			done <- "rpc: " + err.Error()
			return
		}
		done <- resp.Claims[string(c.UID)].GetError()
	}()
	select {
	case e := <-done:
		if strings.HasPrefix(e, "rpc: ") {
			n.t.Fatalf("prepare %s hung: %s", c.Name, e)
		}
		return e
	case <-time.After(6 * time.Second):
		n.t.Fatalf("prepare %s hung", c.Name)
		return ""
	}
}

// requireClean checks that nothing of a claim is left on the node.
func (n *node) requireClean(c *resourceapi.ResourceClaim) {
	n.t.Helper()
	if _, err := os.Stat(n.specPath(c)); !os.IsNotExist(err) {
		n.t.Errorf("CDI spec of %s left behind", c.Name)
	}
	for _, f := range n.checkpointFiles() {
		if strings.Contains(f, string(c.UID)) {
			n.t.Errorf("checkpoint record of %s left behind", c.Name)
		}
	}
}

func TestFailedPrepareRollsBackWithoutHanging(t *testing.T) {
	t.Run("device listed twice", func(t *testing.T) {
		n := newNode(t, "h100x8")
		twice := n.claim("twice", []string{"gpu-0", "gpu-0"})
		if e := n.prepareWithin(twice); !strings.Contains(e, "allocated twice") {
			t.Fatalf("want an error naming the duplicate, got %q", e)
		}
		n.requireClean(twice)
		n.mustPrepare(n.claim("after", []string{"gpu-0"}))
	})
	t.Run("overlapping MIG devices", func(t *testing.T) {
		n := newMigNode(t, "h100x1")
		both := n.claim("overlap", []string{"gpu-0-mig-1g10gb-19-0", "gpu-0-mig-2g20gb-14-0"})
		if e := n.prepareWithin(both); !strings.Contains(e, "same GPU hardware") {
			t.Fatalf("want an overlap error, got %q", e)
		}
		n.requireClean(both)
		_, instances, _ := n.parent()
		if instances() != 0 {
			t.Fatalf("%d MIG instances left", instances())
		}
		n.mustPrepare(n.claim("after", []string{"gpu-0-mig-2g20gb-14-0"}))
	})
	t.Run("failure after the record is written", func(t *testing.T) {
		n := newNode(t, "h100x8")
		// A file where the MPS daemons' directory belongs: the daemon
		// cannot start, after the PrepareStarted record was written.
		if err := os.WriteFile(filepath.Join(n.dir("state"), "mps"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		mps := n.claim("mps", []string{"gpu-3"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`)
		if e := n.prepareWithin(mps); e == "" {
			t.Fatal("prepare with a daemon that cannot start succeeded")
		}
		n.requireClean(mps)
		// The GPU is free again, and a second attempt fails the same way
		// instead of hanging behind the first.
		if e := n.prepareWithin(mps); e == "" {
			t.Fatal("second attempt succeeded")
		}
		n.mustPrepare(n.claim("after", []string{"gpu-3"}))
	})
}

func TestWholeGPUAndItsMigDevicesExcludeEachOther(t *testing.T) {
	n := newMigNode(t, "h100x2")
	n.mustPrepare(n.claim("whole", []string{"gpu-0"}))
	if e := n.prepareWithin(n.claim("mig-of-held", []string{"gpu-0-mig-1g10gb-19-0"})); !strings.Contains(e, "shares GPU hardware with device gpu-0") {
		t.Fatalf("MIG device of a held GPU: %q", e)
	}
	if e := n.prepareWithin(n.claim("one-claim", []string{"gpu-1", "gpu-1-mig-1g10gb-19-0"})); !strings.Contains(e, "same GPU hardware") {
		t.Fatalf("whole GPU and its MIG device in one claim: %q", e)
	}
	n.mustPrepare(n.claim("mig", []string{"gpu-1-mig-3g40gb-9-0"}))
	if e := n.prepareWithin(n.claim("overlapping", []string{"gpu-1-mig-1g10gb-19-2"})); !strings.Contains(e, "shares GPU hardware") {
		t.Fatalf("overlapping MIG placement: %q", e)
	}
	if e := n.prepareWithin(n.claim("parent", []string{"gpu-1"})); !strings.Contains(e, "shares GPU hardware") {
		t.Fatalf("parent of a held MIG device: %q", e)
	}
	n.mustPrepare(n.claim("disjoint", []string{"gpu-1-mig-3g40gb-9-4"}))
}

// putRecord writes a record file as the store would, bypassing its checks.
func putRecord(t *testing.T, dir, name string, claim any) {
	t.Helper()
	payload, err := json.Marshal(claim)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]any{"version": checkpoint.Version, "checksum": crc32.ChecksumIEEE(payload), "claim": json.RawMessage(payload)})
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (n *node) readRecord(c *resourceapi.ResourceClaim) map[string]any {
	n.t.Helper()
	data, err := os.ReadFile(filepath.Join(n.dir("state"), "checkpoint", string(c.UID)+".json"))
	if err != nil {
		n.t.Fatal(err)
	}
	var f struct {
		Claim map[string]any `json:"claim"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		n.t.Fatal(err)
	}
	return f.Claim
}

// TestStartNeverFailsOnItsOwnState damages the node's saved state in each
// way found in the field or by fuzzing; the plugin must start, serve new
// claims, and still unprepare the damaged one.
func TestStartNeverFailsOnItsOwnState(t *testing.T) {
	cases := []struct {
		name    string
		mig     bool
		devices []string
		// damage runs with the plugin stopped; it returns the profile to
		// restart with.
		damage func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string
		// movedAside is set when the damaged file must be moved aside
		// rather than read.
		movedAside bool
	}{
		{"GPU gone", false, []string{"gpu-7"}, func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string {
			return "h100x4"
		}, false},
		{"started dynamic MIG record on a GPU that is gone", true, []string{"gpu-3-mig-1g10gb-19-0"}, func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string {
			if err := n.writeStartedRecord(c); err != nil {
				t.Fatal(err)
			}
			return "h100x2"
		}, false},
		{"device listed twice", false, []string{"gpu-1"}, func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string {
			rec := n.readRecord(c)
			devs := rec["devices"].([]any)
			rec["devices"] = append(devs, devs[0])
			putRecord(t, filepath.Join(n.dir("state"), "checkpoint"), string(c.UID)+".json", rec)
			os.Remove(n.specPath(c))
			return "h100x8"
		}, false},
		{"empty UID", false, []string{"gpu-1"}, func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string {
			rec := n.readRecord(c)
			rec["uid"], rec["namespace"], rec["name"] = "", "", ""
			putRecord(t, filepath.Join(n.dir("state"), "checkpoint"), ".json", rec)
			return "h100x8"
		}, true},
		{"MIG record without UUID", true, []string{"gpu-2-mig-1g10gb-19-0"}, func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string {
			rec := n.readRecord(c)
			rec["devices"].([]any)[0].(map[string]any)["uuid"] = ""
			putRecord(t, filepath.Join(n.dir("state"), "checkpoint"), string(c.UID)+".json", rec)
			os.Remove(n.specPath(c))
			return "h100x8"
		}, false},
		{"directory where the CDI spec belongs", false, []string{"gpu-1"}, func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string {
			os.Remove(n.specPath(c))
			if err := os.MkdirAll(filepath.Join(n.specPath(c), "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			return "h100x8"
		}, false},
		{"huge record", false, []string{"gpu-1"}, func(t *testing.T, n *node, c *resourceapi.ResourceClaim) string {
			rec := n.readRecord(c)
			rec["name"] = strings.Repeat("x", 8<<20) // CRC-valid, 8 MiB
			putRecord(t, filepath.Join(n.dir("state"), "checkpoint"), string(c.UID)+".json", rec)
			return "h100x8"
		}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNodeWith(t, "h100x8", tc.mig)
			c := n.claim("damaged", tc.devices)
			n.mustPrepare(c)
			n.stop()
			profile := tc.damage(t, n, c)
			n.start(profile) // fails the test if Start fails
			aside, _ := filepath.Glob(filepath.Join(n.dir("state"), "checkpoint", "*.corrupt-*"))
			if tc.movedAside && len(aside) == 0 {
				t.Fatal("damaged record was not moved aside")
			}
			if tc.movedAside || tc.name == "GPU gone" {
				waitFor(t, "a Warning event on the Node", func() bool {
					evs, _ := n.client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
					for _, e := range evs.Items {
						if e.InvolvedObject.Kind == "Node" && e.Reason == "PluginStateRecovery" && e.Type == "Warning" {
							return true
						}
					}
					return false
				})
			}
			n.mustPrepare(n.claim("fresh", []string{"gpu-0"}))
			// The kubelet's unprepare of the damaged claim succeeds and
			// leaves nothing behind.
			n.unprepare(c)
			n.requireClean(c)
		})
	}
}

func TestDamagedCDISpecIsRewrittenFromTheRecord(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":   "\x00not json{",
		"truncated": "", // filled below
		"empty":     "",
		"no record": `{"cdiVersion":"0.5.0","kind":"k8s.gpu.nvidia.com/claim","devices":[{"name":"x","containerEdits":{}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			n := newNode(t, "h100x8")
			c := n.claim("c", []string{"gpu-2"})
			ids := n.mustPrepare(c)
			n.stop()
			data, _ := os.ReadFile(n.specPath(c))
			if name == "truncated" {
				content = string(data[:len(data)/2])
			}
			if err := os.WriteFile(n.specPath(c), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			n.start("h100x8")
			spec := inject(t, n.dir("cdi"), ids...)
			if !containsString(mountTargets(spec), "/dev/nvidia2") {
				t.Fatalf("rewritten spec does not expose gpu-2: %v", mountTargets(spec))
			}
			n.requireStillPrepared(c, ids, "gpu-2")
		})
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestPathsReadFromDiskAreNotTrusted(t *testing.T) {
	n := newNode(t, "h100x8")
	live := n.claim("live", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`)
	n.mustPrepare(live)
	victim := filepath.Join(n.root, "victim")
	if err := os.MkdirAll(filepath.Join(victim, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	n.stop()
	ckpt := filepath.Join(n.dir("state"), "checkpoint")
	liveRec := n.readRecord(live)
	liveTarget := liveRec["devices"].([]any)[0].(map[string]any)["sharing"].(map[string]any)["target"].(string)
	for i, target := range []string{"../../victim", "", "..", "a/../../../victim"} {
		uid := fmt.Sprintf("evil-%d", i)
		putRecord(t, ckpt, uid+".json", map[string]any{
			"uid": uid, "namespace": "default", "name": uid, "state": "PrepareStarted",
			"devices": []any{map[string]any{"pool": testNode, "device": "gpu-5", "type": "gpu", "uuid": "GPU-x",
				"sharing": map[string]any{"strategy": "MPS", "target": target}}},
		})
	}
	// A spec whose record was tampered with: its checksum no longer matches.
	evilSpec := filepath.Join(n.dir("cdi"), fmt.Sprintf("k8s.%s-claim_evil-spec.json", testDriver))
	record := fmt.Sprintf(`{"uid":"evil-spec","namespace":"default","name":"x","state":"PrepareCompleted","devices":[{"pool":%q,"device":"gpu-6","type":"gpu","uuid":"GPU-y","sharing":{"strategy":"MPS","target":"../../victim"}}]}`, testNode)
	spec := map[string]any{"cdiVersion": "0.5.0", "kind": "k8s." + testDriver + "/claim",
		"annotations": map[string]string{"gpu.nvidia.com/prepared-claim": record, "gpu.nvidia.com/prepared-claim-crc32": "00000000"},
		"devices":     []any{map[string]any{"name": "evil-spec-gpu-6", "containerEdits": map[string]any{}}}}
	data, _ := json.Marshal(spec)
	if err := os.WriteFile(evilSpec, data, 0o644); err != nil {
		t.Fatal(err)
	}

	n.start("h100x8")
	if _, err := os.Stat(filepath.Join(victim, "data")); err != nil {
		t.Fatalf("recovery removed a directory outside the state dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.dir("state"), "mps", liveTarget)); err != nil {
		t.Fatalf("recovery removed the live claim's MPS daemon directory: %v", err)
	}
	if _, err := os.Stat(evilSpec); !os.IsNotExist(err) {
		t.Fatal("spec with a tampered record was adopted")
	}
	n.mustPrepare(n.claim("gpu6", []string{"gpu-6"}))
	n.unprepare(live)
}

// TestConcurrentSharedPrepareUnprepare runs prepare/unprepare cycles of
// sharing claims on two GPUs at once. Under `make test-race` it catches a
// record that prepare keeps changing while the store hands it to readers.
func TestConcurrentSharedPrepareUnprepare(t *testing.T) {
	n := newNode(t, "h100x2")
	mps := `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`
	ts := `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Short"}}}`
	claims := []*resourceapi.ResourceClaim{n.claim("a", []string{"gpu-0"}, mps), n.claim("b", []string{"gpu-1"}, ts)}
	errs := make(chan error, len(claims))
	for _, c := range claims {
		go func() {
			for i := range 40 {
				ctx, cancel := contextWithTimeout(10 * time.Second)
				resp, err := n.kubelet.NodePrepareResources(ctx, pbRequest(c))
				if err == nil && resp.Claims[string(c.UID)].GetError() != "" {
					err = fmt.Errorf("%s", resp.Claims[string(c.UID)].GetError())
				}
				if err == nil {
					_, err = n.kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: pbClaims(c)})
				}
				cancel()
				if err != nil {
					errs <- fmt.Errorf("%s cycle %d: %w", c.Name, i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for range claims {
		if err := testwait.Receive(t, errs, "a claim's prepare/unprepare cycles"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range claims {
		n.requireClean(c)
	}
}

// TestUnfinishedSpecWritesAreRemoved: a plugin killed while writing a CDI
// spec leaves its temp file; the next start removes it, and only its own
// (the CDI directory is shared with other drivers).
func TestUnfinishedSpecWritesAreRemoved(t *testing.T) {
	n := newNode(t, "h100x2")
	n.stop()
	ours := filepath.Join(n.dir("cdi"), ".k8s."+testDriver+"-staging", "spec.777.tmp")
	theirs := filepath.Join(n.dir("cdi"), "spec.12345.tmp")
	for _, f := range []string{ours, theirs} {
		if err := os.WriteFile(f, []byte(`{"cdiVersion":`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	n.start("h100x2")
	if _, err := os.Stat(ours); !os.IsNotExist(err) {
		t.Fatal("the plugin's unfinished spec write was left behind")
	}
	if _, err := os.Stat(theirs); err != nil {
		t.Fatalf("another writer's temp file was touched: %v", err)
	}
}

// TestRestartRewritesDeviceStatus: a plugin killed after answering the
// kubelet but before its background status write leaves a claim without
// device status; the next start writes it for every kept claim.
func TestRestartRewritesDeviceStatus(t *testing.T) {
	n := newNode(t, "h100x2")
	c := n.claim("kept", []string{"gpu-1"})
	n.mustPrepare(c)
	// The stopped instance's status writer must be done with the client
	// before the reactor chain changes (client-go's fake does not lock it).
	old := n.driver.state.Status.(*devicestatus.Writer)
	n.stop()
	select {
	case <-old.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("the stopped plugin's status writer did not stop")
	}
	var writes atomic.Int32
	n.client.PrependReactor("patch", "resourceclaims", func(action k8stesting.Action) (bool, k8sruntime.Object, error) {
		if action.GetSubresource() == "status" && action.(k8stesting.PatchAction).GetName() == c.Name {
			writes.Add(1)
		}
		return true, &resourceapi.ResourceClaim{}, nil
	})
	n.start("h100x2")
	waitFor(t, "the kept claim's device status", func() bool { return writes.Load() > 0 })
}
