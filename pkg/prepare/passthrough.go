// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// Passthrough (docs/passthrough.md): the binding itself is the passthrough
// kind's (devkind/vfio.go); what stays here is record-level: the record
// that says, before unprepare's first sysfs write, where the GPU is to go,
// and whether a record's addresses are this boot's.

// PassthroughConfig wires passthrough on a node that offers it.
type PassthroughConfig = devkind.PassthroughConfig

// addressTrusted reports whether a record's PCI addresses were read from
// the live GPUs in this boot: written at prepare in this boot, or by a
// restore that confirmed them (restore.go). With the boot unknown, the
// record is trusted as before boot IDs were known.
func (s *State) addressTrusted(rec checkpoint.PreparedClaim) bool {
	return s.BootID == "" || rec.BootID == s.BootID
}

// markUnbinding records, before unprepare's first sysfs write, that the
// claim's GPUs are to go back to nvidia: a start after a kill from here on
// rolls the claim back instead of restoring it. rec is updated.
func (s *State) markUnbinding(rec *checkpoint.PreparedClaim) error {
	changed := false
	for i := range rec.Devices {
		if v := rec.Devices[i].Vfio; v != nil && (v.Driver != vfio.DriverNvidia || rec.State != checkpoint.PrepareStarted) {
			v.Driver = vfio.DriverNvidia
			changed = true
		}
	}
	if !changed {
		return nil
	}
	rec.State = checkpoint.PrepareStarted
	return s.Ledger.Record(*rec)
}
