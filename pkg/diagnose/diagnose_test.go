// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/clusterviewtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

func diagnoseTarget(s *clusterview.Snapshot, t clusterview.Target) *Report {
	switch t.Kind {
	case "pod":
		return DiagnosePod(s, t.Namespace, t.Name)
	case "claim":
		return DiagnoseClaim(s, t.Namespace, t.Name)
	}
	return DiagnoseNode(s, t.Name)
}

// TestFixtures runs every recorded state in testdata and checks its
// verdict, exit code and the evidence both output formats render; the
// whole JSON report must equal testdata/<fixture>.json (-update rewrites
// those).
func TestFixtures(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if len(paths) == 0 {
		t.Fatal("no fixtures")
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			f := clusterviewtest.Load(t, path)
			r := diagnoseTarget(&f.Snapshot, f.Target)
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s\n%s", f.Description, text.String())
			if r.Status != f.Want.Status {
				t.Errorf("status %s, want %s; verdict: %s", r.Status, f.Want.Status, r.Verdict)
			}
			want := map[Status]int{OK: 0, Blocked: 1, Unknown: 2}[f.Want.Status]
			if r.ExitCode() != want {
				t.Errorf("exit code %d, want %d", r.ExitCode(), want)
			}
			for _, s := range f.Want.Verdict {
				if !strings.Contains(r.Verdict, s) {
					t.Errorf("verdict lacks %q:\n%s", s, r.Verdict)
				}
			}
			if f.Want.FailedStep != "" && (r.Prepare == nil || r.Prepare.Step != f.Want.FailedStep) {
				t.Errorf("failed step %+v, want %s", r.Prepare, f.Want.FailedStep)
			}
			if !strings.HasPrefix(text.String(), strings.ToUpper(string(r.Status))+": "+r.Target+"\n"+r.Verdict+"\n") {
				t.Errorf("text output does not start with the verdict:\n%s", text.String())
			}
			var js bytes.Buffer
			if err := r.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			var back Report
			if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Verdict != r.Verdict || back.Status != r.Status {
				t.Errorf("JSON output does not round-trip: %v", err)
			}
			checkGolden(t, strings.TrimSuffix(path, ".yaml")+".json", js.Bytes())
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden JSON reports in testdata (go test ./pkg/diagnose -run TestFixtures -update)")

// checkGolden compares a fixture's whole report, the evidence as well as
// the verdict, with the JSON output recorded next to it.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to record it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("report differs from %s at line %d (run with -update after checking the change):\n got: %s\nwant: %s", path, i+1, g, w)
				return
			}
		}
	}
}
