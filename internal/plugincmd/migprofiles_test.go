// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// TestMigProfileNames: every profile name a simulated GPU has, and the
// forms go-nvlib spells newer profiles in, pass; names of other things
// fail start with the flag, the entry and an example.
func TestMigProfileNames(t *testing.T) {
	good := []string{"1g.24gb+me.all", "2g.45gb+gfx", "1g.23gb-me", " 3g.40gb "}
	for _, model := range simulate.ModelNames() {
		_, inv, err := simulate.Discover(model+"x1", "n1", filepath.Join(t.TempDir(), model))
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, resourceslices.MigProfileNames(inv)...)
	}
	if len(good) < 20 {
		t.Fatalf("only %d names from the simulator: %v", len(good), good)
	}
	if _, err := parseMigProfiles(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"1g10gb", "1G.10GB", "nvidia.com/mig-1g.10gb", "mig-1g.10gb", "gpu-0-mig-1g10gb-0", "gpu-0-mig-1g10gb-19-0", "1g.10gb+", "", "1g.10"} {
		_, err := parseMigProfiles([]string{"1g.10gb", bad})
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		for _, want := range []string{"--mig-profiles", `"` + bad + `"`, "e.g. --mig-profiles=1g.10gb"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: error %q does not mention %s", bad, err, want)
			}
		}
	}
	cmd := newCommand()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"--simulate", "h100x1", "--node-name", "n1", "--print-slices", "--mig-profiles", "1g.10gb,1g10gb"})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--mig-profiles") {
		t.Fatalf("a malformed name: error %v", err)
	}
}

// TestPrintSlicesMigProfiles: the flag reaches what the node publishes.
func TestPrintSlicesMigProfiles(t *testing.T) {
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--simulate", "h100x8", "--node-name", "n1", "--print-slices", "--monitor-devices=false", "--mig-profiles", "1g.10gb,3g.40gb,7g.80gb"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	devices := 0
	for _, doc := range strings.Split(out.String(), "---\n") {
		var s resourceapi.ResourceSlice
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		devices += len(s.Spec.Devices)
	}
	if want := 8 * (1 + 7 + 2 + 1); devices != want {
		t.Fatalf("published %d devices, want %d", devices, want)
	}
}

// TestMigProfilesLog: names this node lacks are logged with what it has,
// and the flag is said to do nothing without dynamic MIG.
func TestMigProfilesLog(t *testing.T) {
	_, inv, err := simulate.Discover("h100x1", "n1", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	logged := func(o resourceslices.Options) string {
		var b strings.Builder
		logMigProfiles(funcr.New(func(prefix, args string) { b.WriteString(args + "\n") }, funcr.Options{}), inv, o)
		return b.String()
	}
	got := logged(resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.10gb", "1g.5gb"}})
	if !strings.Contains(got, `"absent"=["1g.5gb"]`) || !strings.Contains(got, "7g.80gb") {
		t.Errorf("absent name: logged %s", got)
	}
	if got := logged(resourceslices.Options{DynamicMIG: true, MigProfiles: []string{"1g.10gb"}}); got != "" {
		t.Errorf("every name present: logged %s", got)
	}
	if got := logged(resourceslices.Options{MigProfiles: []string{"1g.10gb"}}); !strings.Contains(got, "no effect") {
		t.Errorf("DynamicMIG off: logged %s", got)
	}
}
