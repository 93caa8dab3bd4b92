// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestAmpereMigModeIsTheAdmins (defect 3): on an A100 an admin turned MIG
// mode on; the plugin offers its MIG devices but not the whole GPU, creates
// and destroys instances, never changes MIG mode, and cleans up instances
// no claim owns after a crash.
func TestAmpereMigModeIsTheAdmins(t *testing.T) {
	n := newMigNode(t, "a100-80gbx1:mig")
	var names []string
	for _, s := range n.publishedSlices() {
		for _, d := range s.Spec.Devices {
			names = append(names, d.Name)
		}
	}
	if slices.Contains(names, "gpu-0") || !slices.Contains(names, "gpu-0-mig-7g80gb-0-0") {
		t.Fatalf("published %v", names)
	}
	var gpu nvml.Device
	mode := func() [2]int {
		cur, pend, _ := gpu.GetMigMode()
		return [2]int{cur, pend}
	}
	enabled := [2]int{nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE}

	kept := n.claim("kept", []string{"gpu-0-mig-3g40gb-9-4"})
	lost := n.claim("lost", []string{"gpu-0-mig-2g20gb-14-0"})
	n.mustPrepare(kept)
	n.mustPrepare(lost)
	n.stop()
	// A crash between "created" and "checkpointed": the instance exists,
	// no record or spec does.
	os.Remove(filepath.Join(n.dir("state"), "checkpoint", "uid-lost.json"))
	os.Remove(n.specPath(lost))
	n.start("a100-80gbx1:mig")
	_, instances, _ := n.parent()
	gpu = n.driver.cfg.Backend.Inventory.GPUs[0].Device
	if got := instances(); got != 1 {
		t.Fatalf("after restart %d instances, want only the checkpointed one", got)
	}
	n.unprepare(kept)
	if got := instances(); got != 0 || mode() != enabled {
		t.Fatalf("after the last unprepare: %d instances, MIG mode (current, pending) %v", got, mode())
	}
	if e := n.prepare(n.claim("whole", []string{"gpu-0"}))["uid-whole"].GetError(); !strings.Contains(e, "not published") {
		t.Fatalf("whole-GPU prepare on an A100 in MIG mode: %q", e)
	}
}
