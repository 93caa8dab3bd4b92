// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// TestFileCallsPerCycle holds a prepare+unprepare cycle, through the
// kubelet's gRPC API with device metadata on, to the file system calls
// its crash guarantees need (docs/architecture.md, "Which write protects
// what"), per device kind. pkg/capfile counts every call of the prepare
// path; a call added to it fails here, with the counts to compare. The
// budget is what each write is for:
//
//   - fsync: only the completed record, before the kubelet is told.
//   - rename: the CDI spec, the completed record, the metadata file and
//     its CDI spec; and the record written ahead where a kind has
//     something to undo (dynamic MIG) or sharing is applied.
//   - unlink: the spec, the record, the metadata file, its two
//     directories and its CDI spec; none fails.
//   - mkdir: the claim's two metadata directories.
//   - open: a temp file per rename, the listings of the claim's metadata
//     directory and of the CDI directory (the CDI library's read of the
//     spec it checks is not counted).
func TestFileCallsPerCycle(t *testing.T) {
	const cycles = 5
	for _, tc := range []struct {
		name    string
		mig     bool
		device  string
		configs []string
		want    capfile.Counts
	}{
		{name: "whole GPU", device: "gpu-0",
			want: capfile.Counts{Fsync: 1, Rename: 4, Unlink: 6, Mkdir: 2, Open: 6}},
		{name: "whole GPU, time-slicing", device: "gpu-0",
			configs: []string{`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Long"}}}`},
			want:    capfile.Counts{Fsync: 1, Rename: 5, Unlink: 6, Mkdir: 2, Open: 7}},
		{name: "dynamic MIG", mig: true, device: "gpu-0-mig-1g10gb-19-0",
			want: capfile.Counts{Fsync: 1, Rename: 5, Unlink: 6, Mkdir: 2, Open: 7}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No fastStatusAPI here: its reactor, added while the
			// node's informers list, races with them under -race, and
			// status writes touch no file.
			n := newNodeWith(t, "h100x8", tc.mig)
			claim := n.claim("calls", []string{tc.device}, tc.configs...)
			ctx := context.Background()
			if err := n.cycle(ctx, claim); err != nil { // warm: nothing made once per node counts
				t.Fatal(err)
			}
			before := capfile.Snapshot()
			for i := 0; i < cycles; i++ {
				if err := n.cycle(ctx, claim); err != nil {
					t.Fatal(err)
				}
			}
			got := capfile.Snapshot().Sub(before)
			// chmod depends on the umask the test runs under (none under
			// 022, one per 0644 file under 027): not budgeted.
			got.Chmod = 0
			w := tc.want
			if want := (capfile.Counts{Fsync: w.Fsync * cycles, Rename: w.Rename * cycles, Unlink: w.Unlink * cycles, Mkdir: w.Mkdir * cycles, Open: w.Open * cycles}); got != want {
				t.Errorf("file calls in %d cycles: got %+v, want %+v", cycles, got, want)
			}
		})
	}
}
