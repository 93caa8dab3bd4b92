// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// Dynamic MIG devices were named gpu-<minor>-mig-<profile>-<start> before
// their names carried the GPU instance profile ID (the form dcgm-exporter
// reads). On an H100 the previous release's gpu-0-mig-1g10gb-3 is
// gpu-0-mig-1g10gb-19-3 now.
const (
	legacyMig  = "gpu-0-mig-1g10gb-3"
	currentMig = "gpu-0-mig-1g10gb-19-3"
)

// TestLegacyMigNameClaimAcrossUpgrade: a claim allocated under the
// previous release's name is prepared after the upgrade (the kubelet's
// retry), its record is what the previous release wrote (format v1, the
// device by its old name; 1b7ce73 wrote no boot ID), and a restarted
// plugin restores it (its lost CDI spec rewritten under the recorded
// name), keeps its placement from claims of either name, writes its
// metadata, unprepares it (destroying its MIG device), and stops
// publishing the old name once nothing holds it.
func TestLegacyMigNameClaimAcrossUpgrade(t *testing.T) {
	n := newMigNode(t, "h100x1")
	_, instances, _ := n.parent()
	if names := n.publishedNames(); slices.Contains(names, legacyMig) || !slices.Contains(names, currentMig) {
		t.Fatalf("published %v: want %s, not %s", names, currentMig, legacyMig)
	}
	old := n.claim("old", []string{legacyMig})
	ids := n.mustPrepare(old)
	if want := []string{"k8s.gpu.nvidia.com/claim=uid-old-" + legacyMig}; !slices.Equal(ids, want) {
		t.Fatalf("CDI IDs %v, want %v (named as the claim's allocation names the device)", ids, want)
	}
	inject(t, n.dir("cdi"), ids...)
	if instances() != 1 {
		t.Fatalf("%d MIG devices, want the claim's", instances())
	}

	// The record as the release before this one wrote it.
	n.stop()
	store, _, err := checkpoint.Open(filepath.Join(n.dir("state"), "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := store.Get(old.UID)
	if d := rec.Devices[0]; d.Device != legacyMig || d.Mig == nil || !d.Mig.Dynamic || d.Mig.Profile != "1g.10gb" || d.Mig.Start != 3 || d.Mig.Size != 1 || d.Mig.GIID < 0 {
		t.Fatalf("record %+v", d)
	}
	rec.BootID = ""
	if err := store.Put(rec); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(n.dir("state"), "checkpoint", "uid-old.json")
	if v := recordVersion(t, file); v != "gpu.nvidia.com/checkpoint/v1" {
		t.Fatalf("record written as %s; the releases before read v1", v)
	}
	if err := os.Remove(n.specPath(old)); err != nil {
		t.Fatal(err)
	}

	names := restartedNames(t, n) // the slices the restarted plugin publishes
	_, instances, _ = n.parent()
	if !slices.Contains(names, legacyMig) || !slices.Contains(names, currentMig) {
		t.Fatalf("published %v: want the held %s beside %s, so that the scheduler counts it", names, legacyMig, currentMig)
	}
	if again := n.mustPrepare(old); !slices.Equal(again, ids) {
		t.Fatalf("after the restart prepare answered %v, before %v", again, ids)
	}
	inject(t, n.dir("cdi"), ids...) // the spec, rewritten from the record, names the device so
	d := n.containerMetadata(t, old)
	if attrString(d, "profile") != "1g.10gb" || attrInt(d, "placementStart") != 3 || attrString(d, "uuid") != rec.Devices[0].UUID {
		t.Errorf("metadata of %s: %v", legacyMig, d.Attributes)
	}
	// The placement is held, whatever name another claim has it under.
	for i, intruder := range []string{currentMig, "gpu-0", "gpu-0-mig-2g20gb-14-2", "gpu-0-mig-7g80gb-0-0"} {
		c := n.claim("intruder-"+string(rune('a'+i)), []string{intruder})
		if r := n.prepare(c)[string(c.UID)]; r.GetError() == "" {
			t.Errorf("%s prepared beside %s, which holds the same placement", intruder, legacyMig)
		}
	}
	beside := n.claim("beside", []string{"gpu-0-mig-1g10gb-19-0"})
	n.mustPrepare(beside)

	n.unprepare(old)
	if instances() != 1 {
		t.Fatalf("after unprepare %d MIG devices, want only the one beside", instances())
	}
	if names := restartedNames(t, n); slices.Contains(names, legacyMig) {
		t.Errorf("%s still published once released: %v", legacyMig, names)
	}
	n.unprepare(n.claimObj("beside"))
	if _, instances, _ := n.parent(); instances() != 0 {
		t.Fatalf("%d MIG devices left", instances())
	}
}

// TestLegacyAndCurrentMigNamesConflict: a claim under the current name
// holds its placement from a claim allocated under the old name too.
func TestLegacyAndCurrentMigNamesConflict(t *testing.T) {
	n := newMigNode(t, "h100x1")
	n.mustPrepare(n.claim("new", []string{currentMig}))
	if r := n.prepare(n.claim("old", []string{legacyMig}))["uid-old"]; r.GetError() == "" {
		t.Fatalf("%s prepared beside %s, the same placement", legacyMig, currentMig)
	}
}

func recordVersion(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Version
}
