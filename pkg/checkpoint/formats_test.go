// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

const h100 = "NVIDIA H100 80GB HBM3"

func cdiIDs(uid, device string) []string {
	return []string{"k8s.gpu.nvidia.com/claim=" + uid + "-" + device}
}

// earlierRecords are the records in testdata/formats, as the generator
// described in each directory's README.md put them. A commit wrote those
// its types could express; every value here must be read back.
var earlierRecords = map[types.UID]PreparedClaim{
	"uid-whole-gpu": {UID: "uid-whole-gpu", Namespace: "team-a", Name: "train-gpu", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"gpu"}, Pool: "node-a", Device: "gpu-0", Type: "gpu", UUID: "GPU-0a1b2c3d-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-whole-gpu", "gpu-0")}}},
	"uid-two-gpus-started": {UID: "uid-two-gpus-started", Namespace: "team-a", Name: "pair", State: PrepareStarted, Devices: []PreparedDevice{
		{Requests: []string{"pair"}, Pool: "node-a", Device: "gpu-1", Type: "gpu", UUID: "GPU-11111111-0000-1111-2222-333344445555", ProductName: h100},
		{Requests: []string{"pair"}, Pool: "node-a", Device: "gpu-2", Type: "gpu", UUID: "GPU-22222222-0000-1111-2222-333344445555", ProductName: h100}}},
	"uid-shared-monitor": {UID: "uid-shared-monitor", Namespace: "monitoring", Name: "dcgm", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"all"}, Pool: "node-a", Device: "gpu-3", Type: "gpu", UUID: "GPU-33333333-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-shared-monitor", "gpu-3"), Shared: true}}},
	"uid-dynamic-mig": {UID: "uid-dynamic-mig", Namespace: "team-b", Name: "mig-small", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"mig"}, Pool: "node-a", Device: "gpu-4-mig-1g10gb-3", Type: "mig", UUID: "MIG-44444444-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-dynamic-mig", "gpu-4-mig-1g10gb-3"),
		Mig: &MigRecord{ParentUUID: "GPU-44444444-0000-1111-2222-333344445555", Profile: "1g.10gb", Start: 3, Size: 1, Dynamic: true, GIID: 9, CIID: 0}}}},
	"uid-static-mig": {UID: "uid-static-mig", Namespace: "team-b", Name: "mig-static", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"mig"}, Pool: "node-a", Device: "gpu-5-mig-3g40gb-4", Type: "mig", UUID: "MIG-55555555-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-static-mig", "gpu-5-mig-3g40gb-4"),
		Mig: &MigRecord{ParentUUID: "GPU-55555555-0000-1111-2222-333344445555", Profile: "3g.40gb", Start: 4, Size: 4, GIID: 2, CIID: 0}}}},
	"uid-dynamic-mig-started": {UID: "uid-dynamic-mig-started", Namespace: "team-b", Name: "mig-halfway", State: PrepareStarted, Devices: []PreparedDevice{{
		Requests: []string{"mig"}, Pool: "node-a", Device: "gpu-4-mig-2g20gb-0", Type: "mig", ProductName: h100,
		Mig: &MigRecord{ParentUUID: "GPU-44444444-0000-1111-2222-333344445555", Profile: "2g.20gb", Start: 0, Size: 2, Dynamic: true, GIID: -1, CIID: -1}}}},
	"uid-time-slicing": {UID: "uid-time-slicing", Namespace: "team-c", Name: "notebooks", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"gpu"}, Pool: "node-a", Device: "gpu-6", Type: "gpu", UUID: "GPU-66666666-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-time-slicing", "gpu-6"),
		Sharing: &SharingRecord{Strategy: "TimeSlicing", Target: "GPU-66666666-0000-1111-2222-333344445555", Interval: "Long"}}}},
	"uid-mps-limits": {UID: "uid-mps-limits", Namespace: "team-c", Name: "inference", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"gpu"}, Pool: "node-a", Device: "gpu-7", Type: "gpu", UUID: "GPU-77777777-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-mps-limits", "gpu-7"),
		Sharing: &SharingRecord{Strategy: "MPS", Target: "GPU-77777777-0000-1111-2222-333344445555", ActiveThreadPercentage: 25, PinnedMemoryBytes: 8 << 30}}}},
	"uid-mps-on-mig": {UID: "uid-mps-on-mig", Namespace: "team-c", Name: "mig-mps", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"mig"}, Pool: "node-a", Device: "gpu-4-mig-1g10gb-5", Type: "mig", UUID: "MIG-45454545-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-mps-on-mig", "gpu-4-mig-1g10gb-5"),
		Mig:     &MigRecord{ParentUUID: "GPU-44444444-0000-1111-2222-333344445555", Profile: "1g.10gb", Start: 5, Size: 1, Dynamic: true, GIID: 11, CIID: 0},
		Sharing: &SharingRecord{Strategy: "MPS", Target: "MIG-45454545-0000-1111-2222-333344445555", ActiveThreadPercentage: 50}}}},
	"uid-admin-access": {UID: "uid-admin-access", Namespace: "monitoring", Name: "admin", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"admin"}, Pool: "node-a", Device: "gpu-8", Type: "gpu", UUID: "GPU-88888888-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-admin-access", "gpu-8"), Shared: true, AdminAccess: true}}},
	"uid-memory-share": {UID: "uid-memory-share", Namespace: "team-d", Name: "fraction", State: PrepareCompleted, Devices: []PreparedDevice{{
		Requests: []string{"quarter"}, Pool: "node-a", Device: "gpu-9", Type: "gpu", UUID: "GPU-99999999-0000-1111-2222-333344445555",
		ProductName: h100, CDIDeviceIDs: cdiIDs("uid-memory-share", "gpu-9"), Shared: true, ShareID: "6f1c2d3e-4a5b-4c6d-8e7f-90a1b2c3d4e5",
		Sharing: &SharingRecord{Strategy: "MPS", Target: "GPU-99999999-0000-1111-2222-333344445555", PinnedMemoryBytes: 20 << 30}}}},
}

var (
	baseRecords    = []types.UID{"uid-whole-gpu", "uid-two-gpus-started", "uid-shared-monitor"}
	migRecords     = append(slices.Clone(baseRecords), "uid-dynamic-mig", "uid-static-mig", "uid-dynamic-mig-started")
	sharingRecords = append(slices.Clone(migRecords), "uid-time-slicing", "uid-mps-limits", "uid-mps-on-mig")
	adminRecords   = append(slices.Clone(sharingRecords), "uid-admin-access")
	shareRecords   = append(slices.Clone(adminRecords), "uid-memory-share")
)

// earlierFormats: one directory per layout an earlier commit wrote.
var earlierFormats = []struct {
	commit string
	uids   []types.UID
}{
	{"4bfdb4e", baseRecords},    // checksum over a re-encoding; no mig
	{"aaccb73", migRecords},     // + mig
	{"4ced75d", sharingRecords}, // + sharing
	{"dbafe58", adminRecords},   // + adminAccess
	{"1b7ce73", shareRecords},   // + shareID: the last v1 writer
}

// copyDir copies the regular files of src into a fresh temp dir.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// snapshot returns every file of dir with its content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range listDir(t, dir) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(data)
	}
	return out
}

// TestEarlierFormatsAreRead opens records written by every earlier format
// of this repository: all load with every field they had, Open rewrites
// none of them (the previous binary must still read them after a
// rollback), and a Put rewrites one as the current format losing nothing.
func TestEarlierFormatsAreRead(t *testing.T) {
	for _, tc := range earlierFormats {
		t.Run(tc.commit, func(t *testing.T) {
			dir := copyDir(t, filepath.Join("testdata", "formats", tc.commit))
			var files []types.UID
			for name := range snapshot(t, dir) {
				if uid, ok := strings.CutSuffix(name, fileSuffix); ok {
					files = append(files, types.UID(uid))
				}
			}
			if !sameUIDs(files, tc.uids) {
				t.Fatalf("testdata holds %v, the test expects %v", files, tc.uids)
			}
			before := snapshot(t, dir)
			s, rec := reopen(t, dir)
			if len(rec.MovedAside) != 0 || len(rec.Newer) != 0 {
				t.Fatalf("moved aside %v, newer %v", rec.MovedAside, rec.Newer)
			}
			if got := len(s.List()); got != len(tc.uids) {
				t.Fatalf("%d records loaded, want %d", got, len(tc.uids))
			}
			for _, uid := range tc.uids {
				got, ok := s.Get(uid)
				if want := earlierRecords[uid]; !ok || !reflect.DeepEqual(got, want) {
					t.Errorf("%s:\n got %s\nwant %s", uid, dump(got), dump(want))
				}
				checkKeyFields(t, got)
			}
			if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
				t.Fatal("Open changed files of an earlier format")
			}
			// Writing one back keeps every field, in the oldest format
			// that holds it.
			for _, uid := range tc.uids {
				c, _ := s.Get(uid)
				if err := s.Put(c); err != nil {
					t.Fatal(err)
				}
				if v := fileVersion(t, filepath.Join(dir, string(uid)+fileSuffix)); v != versionPrefix+strconv.Itoa(writeFormat(c)) {
					t.Errorf("%s rewritten as %q", uid, v)
				}
			}
			s2, _ := reopen(t, dir)
			for _, uid := range tc.uids {
				if got, _ := s2.Get(uid); !reflect.DeepEqual(got, earlierRecords[uid]) {
					t.Errorf("%s after a rewrite:\n got %s\nwant %s", uid, dump(got), dump(earlierRecords[uid]))
				}
			}
		})
	}
}

// checkKeyFields names the values an older reader lost or misread, so that
// a failure says which one.
func checkKeyFields(t *testing.T, c PreparedClaim) {
	t.Helper()
	if c.BootID != "" {
		t.Errorf("%s: bootID %q in a v1 record", c.UID, c.BootID)
	}
	if len(c.Devices) == 0 {
		t.Fatalf("%s: no devices", c.UID)
	}
	d := c.Devices[0]
	switch c.UID {
	case "uid-dynamic-mig":
		if d.Mig == nil || !d.Mig.Dynamic || d.Mig.GIID != 9 || d.Mig.CIID != 0 || d.Mig.Profile != "1g.10gb" {
			t.Errorf("dynamic MIG: %+v", d.Mig)
		}
	case "uid-static-mig":
		if d.Mig == nil || d.Mig.Dynamic || d.Mig.GIID != 2 || d.Mig.CIID != 0 || d.Mig.Start != 4 || d.Mig.Size != 4 {
			t.Errorf("static MIG: %+v", d.Mig)
		}
	case "uid-dynamic-mig-started":
		if c.State != PrepareStarted || d.UUID != "" || d.Mig == nil || d.Mig.GIID != -1 || d.Mig.CIID != -1 {
			t.Errorf("started dynamic MIG: %s %q %+v", c.State, d.UUID, d.Mig)
		}
	case "uid-time-slicing":
		if d.Sharing == nil || d.Sharing.Strategy != "TimeSlicing" || d.Sharing.Interval != "Long" || d.Sharing.Target != d.UUID {
			t.Errorf("time-slicing: %+v", d.Sharing)
		}
	case "uid-mps-limits":
		if d.Sharing == nil || d.Sharing.Strategy != "MPS" || d.Sharing.ActiveThreadPercentage != 25 || d.Sharing.PinnedMemoryBytes != 8<<30 {
			t.Errorf("MPS limits: %+v", d.Sharing)
		}
	case "uid-mps-on-mig":
		if d.Sharing == nil || d.Sharing.Target != d.UUID || d.Mig == nil || d.Mig.GIID != 11 {
			t.Errorf("MPS on MIG: %+v %+v", d.Sharing, d.Mig)
		}
	case "uid-admin-access":
		if !d.AdminAccess || !d.Shared {
			t.Errorf("admin access: %+v", d)
		}
	case "uid-memory-share":
		if d.ShareID != "6f1c2d3e-4a5b-4c6d-8e7f-90a1b2c3d4e5" || !d.Shared || d.Sharing == nil || d.Sharing.PinnedMemoryBytes != 20<<30 {
			t.Errorf("memory share: %+v %+v", d, d.Sharing)
		}
	}
}

func sameUIDs(a, b []types.UID) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func dump(c PreparedClaim) string {
	data, _ := json.Marshal(c)
	return string(data)
}

func fileVersion(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return f.Version
}
