// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// podClaim makes claim one that a pod's ResourceClaimTemplate generated:
// its metadata is mounted under the pod's claim name, not the claim's.
func (n *node) podClaim(claim *resourceapi.ResourceClaim, podClaimName string) *resourceapi.ResourceClaim {
	n.t.Helper()
	claim.Annotations = map[string]string{resourceapi.PodResourceClaimAnnotation: podClaimName}
	updated, err := n.client.ResourceV1().ResourceClaims(claim.Namespace).Update(context.Background(), claim, metav1.UpdateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return updated
}

// Issue 28, defect 8: after a reboot (CDI directory emptied, MIG devices
// gone) start-up restores the claims and writes their device metadata
// again, with the new MIG UUIDs, although the kubelet does not prepare
// them again: the metadata CDI ID the kubelet holds resolves, and the
// file names the MIG device the container now gets. A restart without a
// reboot leaves the metadata as it is.
func TestDeviceMetadataRewrittenAfterReboot(t *testing.T) {
	const profile = "h100x1"
	n := newMigNode(t, profile)
	claims := []*resourceapi.ResourceClaim{
		n.claim("mig", []string{"gpu-0-mig-1g10gb-19-0"}),
		n.podClaim(n.claim("from-template", []string{"gpu-0-mig-1g10gb-19-1"}), "gpus"),
	}
	ids := map[string][]string{}
	before := map[string]string{}
	for _, c := range claims {
		ids[c.Name] = n.allCDIIDs(c)
		d, gen := n.metadataOf(t, c, ids[c.Name])
		before[c.Name] = attrString(d, "uuid")
		if gen != 1 {
			t.Errorf("claim %s: generation %d after prepare, want 1", c.Name, gen)
		}
	}
	metaSpecs := func() []string {
		m, _ := filepath.Glob(filepath.Join(n.dir("cdi"), testDriver+"_metadata_*.json"))
		return m
	}

	// A restart: nothing changed, nothing is written.
	n.restart(profile)
	for _, c := range claims {
		d, gen := n.metadataOf(t, c, ids[c.Name])
		if got := attrString(d, "uuid"); got != before[c.Name] || gen != 1 {
			t.Errorf("claim %s: after a restart uuid %q generation %d, want %q and 1", c.Name, got, gen, before[c.Name])
		}
	}

	n.stop()
	rebootNode(t, n, profile)
	if len(metaSpecs()) != 0 {
		t.Fatal("the reboot left metadata CDI specs")
	}
	n.start(profile)
	if got := len(metaSpecs()); got != len(claims) {
		t.Errorf("%d metadata CDI specs after the reboot, want %d", got, len(claims))
	}
	for _, c := range claims {
		rec, ok := n.driver.state.Ledger.Get(c.UID)
		if !ok {
			t.Fatalf("claim %s: no record after the reboot", c.Name)
		}
		now := rec.Devices[0].UUID
		if !strings.HasPrefix(now, "MIG-") || now == before[c.Name] {
			t.Fatalf("claim %s: restored MIG device has UUID %q, before the reboot %q", c.Name, now, before[c.Name])
		}
		// The container restarts with the IDs the kubelet got before.
		d, gen := n.metadataOf(t, c, ids[c.Name])
		if got := attrString(d, "uuid"); got != now {
			t.Errorf("claim %s: metadata uuid %q after the reboot, want the restored MIG device's %q", c.Name, got, now)
		}
		if gen != 2 {
			t.Errorf("claim %s: metadata generation %d after the reboot, want 2", c.Name, gen)
		}
		requirePublished(t, n, d)
	}

	// The kubelet's prepare after all: same IDs, same metadata.
	for _, c := range claims {
		if got := n.allCDIIDs(c); strings.Join(got, ",") != strings.Join(ids[c.Name], ",") {
			t.Errorf("claim %s: prepare after the reboot returned %v, before %v", c.Name, got, ids[c.Name])
		}
		rec, _ := n.driver.state.Ledger.Get(c.UID)
		if d, _ := n.metadataOf(t, c, ids[c.Name]); attrString(d, "uuid") != rec.Devices[0].UUID {
			t.Errorf("claim %s: metadata uuid %q after prepare, want %q", c.Name, attrString(d, "uuid"), rec.Devices[0].UUID)
		}
		n.unprepare(c)
	}
	if left := metaSpecs(); len(left) != 0 {
		t.Errorf("metadata CDI specs left after unprepare: %v", left)
	}
	if _, err := os.Stat(filepath.Join(n.dir("plugin"), metadataSubDir, "default_mig")); !os.IsNotExist(err) {
		t.Errorf("metadata files left after unprepare: %v", err)
	}
}

// A claim that start-up could not restore (another MIG device over its
// placement) gets no metadata spec then; the kubelet's prepare that
// restores it writes its metadata, with the new MIG UUID, through the
// helper as any prepare does.
func TestDeviceMetadataOfClaimRestoredAtPrepare(t *testing.T) {
	const profile = "h100x1"
	n := newMigNode(t, profile)
	c := n.claim("retry", []string{"gpu-0-mig-2g20gb-14-2"})
	ids := n.allCDIIDs(c)
	d, _ := n.metadataOf(t, c, ids)
	before := attrString(d, "uuid")
	intruder := n.driver.state.Devices["gpu-0-mig-1g10gb-19-2"].Placement
	n.stop()
	rebootNode(t, n, profile)
	_, inv, err := simulate.Discover(profile, testNode, filepath.Join(n.dir("state"), "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mig.Create(inv.GPUs[0].Device, intruder); err != nil {
		t.Fatal(err)
	}
	n.start(profile)
	if un := n.driver.state.Unrestored(); len(un) != 1 || un[0].UID != c.UID {
		t.Fatalf("unrestored after start: %v", un)
	}
	spec := filepath.Join(n.dir("cdi"), testDriver+"_metadata_"+string(c.UID)+"_gpu.json")
	if _, err := os.Stat(spec); !os.IsNotExist(err) {
		t.Errorf("metadata spec of a claim not restored: %v", err)
	}
	if got := n.allCDIIDs(c); strings.Join(got, ",") != strings.Join(ids, ",") {
		t.Fatalf("prepare that restores returned %v, before %v", got, ids)
	}
	rec, _ := n.driver.state.Ledger.Get(c.UID)
	now := rec.Devices[0].UUID
	if !strings.HasPrefix(now, "MIG-") || now == before {
		t.Fatalf("restored MIG device has UUID %q, before the reboot %q", now, before)
	}
	if d, _ := n.metadataOf(t, c, ids); attrString(d, "uuid") != now {
		t.Errorf("metadata uuid %q after the restoring prepare, want %q", attrString(d, "uuid"), now)
	}
	n.unprepare(c)
}
