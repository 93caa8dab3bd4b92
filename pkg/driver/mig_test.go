// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

var fourMig = []string{"gpu-0-mig-3g40gb-9-4", "gpu-0-mig-2g20gb-14-0", "gpu-0-mig-1g10gb-19-2", "gpu-0-mig-1g10gb-19-3"}

func (n *node) parent() (uuid string, instances func() int, migMode func() int) {
	return n.parentOf(0)
}

func (n *node) parentOf(i int) (uuid string, instances func() int, migMode func() int) {
	sim := n.driver.cfg.Backend.Simulator
	g := n.driver.cfg.Backend.Inventory.GPUs[i]
	return g.UUID, func() int { return sim.MigInstanceCount(g.UUID) }, func() int {
		m, _, _ := g.Device.GetMigMode()
		return m
	}
}

func TestMigPrepareCreatesAndUnprepareDestroys(t *testing.T) {
	n := newMigNode(t, "h100x1")
	parentUUID, instances, migMode := n.parent()
	claim := n.claim("four", fourMig)
	ids := n.mustPrepare(claim)
	if len(ids) != 4 || instances() != 4 || migMode() != nvml.DEVICE_MIG_ENABLE {
		t.Fatalf("after prepare: ids %v, %d instances, MIG mode %d", ids, instances(), migMode())
	}
	// Each device reaches its container with the parent GPU and its own MIG device.
	seen := map[string]bool{}
	for _, id := range ids {
		spec := inject(t, n.dir("cdi"), id)
		var migFiles []string
		for _, m := range spec.Mounts {
			if strings.HasPrefix(m.Destination, "/dev/nvidia-mig/") {
				migFiles = append(migFiles, m.Source)
			}
		}
		if len(migFiles) != 1 || !slices.Contains(mountTargets(spec), "/dev/nvidia0") {
			t.Fatalf("%s: mounts %v", id, mountTargets(spec))
		}
		data, err := os.ReadFile(migFiles[0])
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(data)), parentUUID) {
			t.Fatalf("%s: MIG device file %q: %v", id, data, err)
		}
		seen[strings.Fields(string(data))[0]] = true
	}
	if len(seen) != 4 {
		t.Fatalf("want four distinct MIG UUIDs, got %v", seen)
	}
	// Claim status carries the MIG UUIDs.
	waitFor(t, "MIG device status", func() bool {
		c, _ := n.client.ResourceV1().ResourceClaims("default").Get(context.Background(), "four", metav1.GetOptions{})
		if c == nil || len(c.Status.Devices) != 4 {
			return false
		}
		var d configapi.DeviceStatusData
		_ = json.Unmarshal(c.Status.Devices[0].Data.Raw, &d)
		return seen[d.UUID]
	})

	n.unprepare(claim)
	if instances() != 0 || migMode() != nvml.DEVICE_MIG_DISABLE {
		t.Fatalf("after unprepare: %d instances, MIG mode %d", instances(), migMode())
	}
	// The GPU is usable whole again.
	n.mustPrepare(n.claim("whole", []string{"gpu-0"}))
}

func TestMigSurvivesRestartAndOrphansAreDestroyed(t *testing.T) {
	n := newMigNode(t, "h100x1")
	kept := n.claim("kept", []string{"gpu-0-mig-1g10gb-19-0"})
	lost := n.claim("lost", []string{"gpu-0-mig-2g20gb-14-2"})
	keptIDs := n.mustPrepare(kept)
	n.mustPrepare(lost)
	n.stop()
	// Simulate a crash between "created" and "checkpointed" for one claim:
	// its instance exists, but no record or spec does.
	os.Remove(filepath.Join(n.dir("state"), "checkpoint", "uid-lost.json"))
	os.Remove(n.specPath(lost))
	n.start("h100x1")
	_, instances, _ := n.parent()
	if got := instances(); got != 1 {
		t.Fatalf("after restart %d instances, want only the checkpointed one", got)
	}
	if again := n.mustPrepare(kept); !slices.Equal(again, keptIDs) {
		t.Fatalf("after restart prepare returned %v, before %v", again, keptIDs)
	}
	// The orphan's placement is free again.
	n.mustPrepare(n.claim("reuse", []string{"gpu-0-mig-2g20gb-14-2"}))
	n.unprepare(kept)
	n.unprepare(n.claimObj("reuse"))
	if got := instances(); got != 0 {
		t.Fatalf("%d instances left", got)
	}
}

func TestMigConfigKinds(t *testing.T) {
	n := newMigNode(t, "h100x1")
	ok := n.claim("mig-cfg", []string{"gpu-0-mig-1g10gb-19-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig"}`)
	bad := n.claim("gpu-cfg", []string{"gpu-0-mig-1g10gb-19-1"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`)
	res := n.prepare(ok, bad)
	if e := res[string(ok.UID)].GetError(); e != "" {
		t.Fatalf("MigDeviceConfig on a MIG device failed: %s", e)
	}
	if e := res[string(bad.UID)].GetError(); !strings.Contains(e, "use kind MigDeviceConfig") {
		t.Fatalf("GpuConfig on a MIG device: %q", e)
	}
	_, instances, _ := n.parent()
	if instances() != 1 {
		t.Fatalf("the failed claim left MIG instances behind: %d", instances())
	}
}

// TestStaticMig: a GPU an admin partitioned is published as its MIG devices
// (with UUIDs, without the parent) and its layout is left alone.
func TestStaticMig(t *testing.T) {
	root, err := os.MkdirTemp("", "gdra")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	// The admin's layout, made through NVML before the plugin starts (an
	// A100 changes MIG mode only with a reset, which only an admin does).
	sim, inv, err := simulate.Discover("a100-80gbx2", testNode, filepath.Join(root, "state", "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	g := inv.GPUs[1]
	if err := sim.SetMigModeAsAdmin(g.UUID, nvml.DEVICE_MIG_ENABLE); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name  string
		start uint32
	}{{"3g.40gb", 0}, {"3g.40gb", 4}} {
		prof := profileByName(t, g.MigProfiles, p.name)
		if _, err := mig.Create(g.Device, mig.Placement{Profile: prof, Start: p.start, Size: 4}); err != nil {
			t.Fatal(err)
		}
	}

	n := newNodeAt(t, root, "a100-80gbx2", true)
	var names []string
	for _, s := range n.publishedSlices() {
		for _, d := range s.Spec.Devices {
			names = append(names, d.Name)
			if strings.HasPrefix(d.Name, "gpu-1") && d.Attributes["uuid"].StringValue == nil {
				t.Errorf("static MIG device %s has no uuid", d.Name)
			}
		}
	}
	if slices.Contains(names, "gpu-1") || !slices.Contains(names, "gpu-1-mig-3g40gb-0") || !slices.Contains(names, "gpu-1-mig-3g40gb-4") || !slices.Contains(names, "gpu-0") {
		t.Fatalf("published %v", names)
	}
	if slices.Contains(names, "gpu-1-mig-1g10gb-19-0") {
		t.Fatal("a statically partitioned GPU is offered for dynamic MIG too")
	}
	_, instances, _ := n.parentOf(1)
	claim := n.claim("static", []string{"gpu-1-mig-3g40gb-4"})
	ids := n.mustPrepare(claim)
	rec, _ := n.driver.state.Ledger.Get(claim.UID)
	if !strings.HasPrefix(rec.Devices[0].UUID, "MIG-") || len(ids) != 1 {
		t.Fatalf("static MIG prepare: %+v", rec.Devices[0])
	}
	n.unprepare(claim)
	if instances() != 2 {
		t.Fatalf("unprepare changed the admin's layout: %d instances", instances())
	}
}

func profileByName(t *testing.T, profiles []nvdev.MigProfile, name string) nvdev.MigProfile {
	t.Helper()
	for _, p := range profiles {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no profile %s", name)
	return nvdev.MigProfile{}
}
