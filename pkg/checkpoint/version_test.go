// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package checkpoint

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const (
	v1 = "gpu.nvidia.com/checkpoint/v1"
	v2 = "gpu.nvidia.com/checkpoint/v2"
	v3 = "gpu.nvidia.com/checkpoint/v3"
	// vNewer is a format newer than this driver's.
	vNewer = "gpu.nvidia.com/checkpoint/v4"
)

// writeEnvelope writes a file of any version around a hand-written claim,
// with the checksum of exactly those bytes; extra goes into the envelope.
func writeEnvelope(t *testing.T, dir, name, version, payload, extra string) []byte {
	t.Helper()
	data := fmt.Appendf(nil, `{"version":%q,"checksum":%d,"claim":%s%s}`, version, crc32.ChecksumIEEE([]byte(payload)), payload, extra)
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestVersionConstants(t *testing.T) {
	if Version != v3 || Version != versionPrefix+strconv.Itoa(FormatVersion) {
		t.Fatalf("Version %q, FormatVersion %d", Version, FormatVersion)
	}
	if n, ok := parseVersion(Version); !ok || n != FormatVersion {
		t.Fatalf("parseVersion(Version) = %d, %v", n, ok)
	}
}

// TestPutWritesOldestFormatThatHoldsTheRecord: a prepared claim is written
// as v1, which the release before 9ac2442 reads (it ignores bootID), and
// keeps its boot ID; a RestorePending record, which a v1 reader would move
// aside, is written as v2. A record without a boot ID writes no field.
func TestPutWritesOldestFormatThatHoldsTheRecord(t *testing.T) {
	dir := t.TempDir()
	s, _ := reopen(t, dir)
	c := fullRecord("u1", PrepareCompleted)
	c.BootID = "21d6511a-6f19-428e-8a1b-0808e6cce955"
	if err := s.Put(c); err != nil {
		t.Fatal(err)
	}
	noBoot := fullRecord("u2", PrepareStarted)
	noBoot.BootID = ""
	if err := s.Put(noBoot); err != nil {
		t.Fatal(err)
	}
	pending := fullRecord("u3", RestorePending)
	if err := s.Put(pending); err != nil {
		t.Fatal(err)
	}
	for uid, want := range map[string]string{"u1": v1, "u2": v1, "u3": v2} {
		if v := fileVersion(t, filepath.Join(dir, uid+fileSuffix)); v != want {
			t.Fatalf("%s written as %q, want %q", uid, v, want)
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, "u1.json"))
	if !strings.Contains(string(data), `"bootID":"21d6511a-6f19-428e-8a1b-0808e6cce955"`) {
		t.Fatalf("u1 on disk: %s", data)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "u2.json")); strings.Contains(string(data), "bootID") {
		t.Fatalf("u2 without a boot ID wrote one: %s", data)
	}
	s2, rec := reopen(t, dir)
	if len(rec.MovedAside)+len(rec.Newer) != 0 {
		t.Fatalf("reopen: %+v", rec)
	}
	for _, want := range []PreparedClaim{c, noBoot, pending} {
		if got, ok := s2.Get(want.UID); !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s after reopen:\n got %s\nwant %s", want.UID, dump(got), dump(want))
		}
	}
}

func TestBootID(t *testing.T) {
	for id, ok := range map[string]bool{
		"":                                     true, // records of format v1
		"21d6511a-6f19-428e-8a1b-0808e6cce955": true,
		"21D6511A6F19428E8A1B0808E6CCE955":     true,
		strings.Repeat("a", 64):                true,
		strings.Repeat("a", 65):                false,
		"../../etc":                            false,
		"xyz":                                  false,
		"21d6511a 6f19":                        false,
		"21d6511a\n":                           false,
	} {
		c := fullRecord("u1", PrepareCompleted)
		c.BootID = id
		if err := c.Validate(); (err == nil) != ok {
			t.Errorf("Validate with bootID %q: %v", id, err)
		}
		if c.DeepCopy().BootID != id {
			t.Errorf("DeepCopy lost bootID %q", id)
		}
	}
	s, _ := reopen(t, t.TempDir())
	c := fullRecord("u1", PrepareCompleted)
	c.BootID = "not/a/boot/id"
	if err := s.Put(c); err == nil || !strings.Contains(err.Error(), "bootID") {
		t.Fatalf("Put with a bad boot ID: %v", err)
	}
}

// TestVersionStrings: v1 and v2 load, a well-formed higher number is a
// newer record, anything else is damage.
func TestVersionStrings(t *testing.T) {
	const payload = `{"uid":"u1","state":"PrepareCompleted"}`
	for version, want := range map[string]string{
		v1:                                      "loaded",
		v2:                                      "loaded",
		v3:                                      "loaded",
		vNewer:                                  "newer",
		"gpu.nvidia.com/checkpoint/v10":         "newer",
		"gpu.nvidia.com/checkpoint/v123456789":  "newer",
		"gpu.nvidia.com/checkpoint/v0":          "aside",
		"gpu.nvidia.com/checkpoint/v02":         "aside",
		"gpu.nvidia.com/checkpoint/v-3":         "aside",
		"gpu.nvidia.com/checkpoint/v3a":         "aside",
		"gpu.nvidia.com/checkpoint/v":           "aside",
		"gpu.nvidia.com/checkpoint/v1234567890": "aside",
		"gpu.nvidia.com/checkpoint/V3":          "aside",
		"example.com/checkpoint/v3":             "aside",
		"v3":                                    "aside",
		"":                                      "aside",
	} {
		t.Run(version, func(t *testing.T) {
			dir := t.TempDir()
			writeEnvelope(t, dir, "u1.json", version, payload, "")
			s, rec := reopen(t, dir)
			got := "none"
			switch {
			case len(s.List()) == 1:
				got = "loaded"
			case len(rec.Newer) == 1:
				got = "newer"
			case len(rec.MovedAside) == 1:
				got = "aside"
			}
			if got != want {
				t.Fatalf("%s, want %s (%+v)", got, want, rec)
			}
		})
	}
	t.Run("version not a string", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "u1.json"), []byte(`{"version":3,"claim":{}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, rec := reopen(t, dir); len(rec.MovedAside) != 1 {
			t.Fatalf("%+v", rec)
		}
	})
}

// TestDecodingByVersion: the current format refuses fields it does not
// know; v1, written by commits with fewer fields, is read leniently, but
// never takes a field that did not exist in v1.
func TestDecodingByVersion(t *testing.T) {
	const dev = `"pool":"n1","device":"mig-0","type":"mig","uuid":"MIG-1"`
	for _, tc := range []struct {
		name, version, payload, extra string
		loaded                        bool
	}{
		{"v2 plain", v2, `{"uid":"u1","state":"PrepareCompleted","bootID":"abc-123"}`, "", true},
		{"v2 unknown claim field", v2, `{"uid":"u1","state":"PrepareCompleted","lease":1}`, "", false},
		{"v2 unknown device field", v2, `{"uid":"u1","state":"PrepareCompleted","devices":[{` + dev + `,"vfio":true}]}`, "", false},
		{"v2 unknown mig field", v2, `{"uid":"u1","state":"PrepareCompleted","devices":[{` + dev + `,"mig":{"giID":1,"ciID":0,"placementV2":7}}]}`, "", false},
		{"v2 unknown envelope field", v2, `{"uid":"u1","state":"PrepareCompleted"}`, `,"signature":"x"`, false},
		{"v2 mig without giID", v2, `{"uid":"u1","state":"PrepareCompleted","devices":[{` + dev + `,"mig":{"ciID":0}}]}`, "", false},
		{"v2 mig with null ciID", v2, `{"uid":"u1","state":"PrepareCompleted","devices":[{` + dev + `,"mig":{"giID":1,"ciID":null}}]}`, "", false},
		{"v2 bad bootID", v2, `{"uid":"u1","state":"PrepareCompleted","bootID":"../x"}`, "", false},
		{"v1 unknown field", v1, `{"uid":"u1","state":"PrepareCompleted","note":"x"}`, "", true},
		{"v1 mig without ciID", v1, `{"uid":"u1","state":"PrepareCompleted","devices":[{` + dev + `,"mig":{"giID":1}}]}`, "", false},
		{"v1 mig with both IDs", v1, `{"uid":"u1","state":"PrepareCompleted","devices":[{` + dev + `,"mig":{"giID":1,"ciID":0}}]}`, "", true},
		{"v1 without state", v1, `{"uid":"u1"}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeEnvelope(t, dir, "u1.json", tc.version, tc.payload, tc.extra)
			s, rec := reopen(t, dir)
			wantAside := 1
			if tc.loaded {
				wantAside = 0
			}
			if got := len(s.List()) == 1; got != tc.loaded || len(rec.MovedAside) != wantAside {
				t.Fatalf("loaded %v, want %v (%+v)", got, tc.loaded, rec)
			}
		})
	}
	t.Run("v1 keeps its bootID", func(t *testing.T) {
		dir := t.TempDir()
		writeEnvelope(t, dir, "u1.json", v1, `{"uid":"u1","state":"PrepareCompleted","bootID":"abc"}`, "")
		s, _ := reopen(t, dir)
		if c, ok := s.Get("u1"); !ok || c.BootID != "abc" {
			t.Fatalf("v1 record with bootID: %+v, %v", c, ok)
		}
	})
	t.Run("v1 RestorePending is damage", func(t *testing.T) {
		dir := t.TempDir()
		writeEnvelope(t, dir, "u1.json", v1, `{"uid":"u1","state":"RestorePending"}`, "")
		if s, rec := reopen(t, dir); len(s.List()) != 0 || len(rec.MovedAside) != 1 {
			t.Fatalf("a v1 record cannot be RestorePending: loaded %d, %+v", len(s.List()), rec)
		}
	})
}

// A record with a passthrough device is written as v3, so that the release
// before (v2) leaves it alone instead of taking the GPU for an idle whole
// GPU; v1 and v2 files cannot carry one.
func TestVfioRecordIsV3(t *testing.T) {
	dir := t.TempDir()
	s, _ := reopen(t, dir)
	c := PreparedClaim{UID: "u-vm", State: PrepareCompleted, Devices: []PreparedDevice{{
		Pool: "n1", Device: "gpu-0-vfio", Type: "gpu", UUID: "GPU-1",
		Vfio: &VfioRecord{PCIBusID: "0000:18:00.0", IOMMUGroup: "40", Driver: "vfio-pci"},
	}}}
	if err := s.Put(c); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "u-vm.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"version":"`+v3+`"`) {
		t.Fatalf("written as %s", data)
	}
	s2, _ := reopen(t, dir)
	if got, ok := s2.Get("u-vm"); !ok || got.Devices[0].Vfio == nil || got.Devices[0].Vfio.Driver != "vfio-pci" {
		t.Fatalf("read back %+v %v", got, ok)
	}
	for _, v := range []string{v1, v2} {
		d := t.TempDir()
		writeEnvelope(t, d, "u1.json", v, `{"uid":"u1","state":"PrepareCompleted","devices":[{"pool":"n1","device":"gpu-0-vfio","type":"gpu","uuid":"GPU-1","vfio":{"pciBusID":"0000:18:00.0","driver":"vfio-pci"}}]}`, "")
		if s, rec := reopen(t, d); len(s.List()) != 0 || len(rec.MovedAside) != 1 {
			t.Fatalf("%s record with vfio loaded", v)
		}
	}
	bad := c
	bad.Devices = []PreparedDevice{c.Devices[0]}
	bad.Devices[0].Vfio = &VfioRecord{PCIBusID: "../../x", Driver: "vfio-pci"}
	if err := bad.Validate(); err == nil {
		t.Fatal("a malformed PCI address validated")
	}
}
