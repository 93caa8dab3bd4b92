// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package gpusmoke

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

func statuses(r *report) map[string]string {
	out := map[string]string{}
	for _, res := range r.results {
		out[res.check] = res.status
	}
	return out
}

func failures(r *report) []string {
	var out []string
	for _, res := range r.results {
		if res.status == "FAIL" {
			out = append(out, res.check+": "+res.detail)
		}
	}
	return out
}

// smokeFiles writes what hack/gpu-smoke.sh hands to `gpudra smoke compare`
// for a simulated node: the plugin's slices, nvidia-smi's GPU list and its
// MIG profile table.
func smokeFiles(t *testing.T, edit func(gpus []string, lgip *strings.Builder)) (slicesFile, gpusFile, lgipFile string) {
	t.Helper()
	dir := t.TempDir()
	_, inv, err := simulate.Discover("h100x2", smokeNode, filepath.Join(dir, "sim"))
	if err != nil {
		t.Fatal(err)
	}
	var y bytes.Buffer
	res := resourceslices.Build(smokeNode, inv, resourceslices.Options{DynamicMIG: true})
	if err := resourceslices.PrintYAML(&y, resourceslices.Objects(driverName, smokeNode, res)); err != nil {
		t.Fatal(err)
	}
	var gpus []string
	var lgip strings.Builder
	lgip.WriteString("+---------------------------------------------------+\n| GPU instance profiles:                            |\n| GPU   Name             ID    Instances   Memory ...\n|====================================================|\n")
	for _, g := range inv.GPUs {
		// nvidia-smi's forms: 8-digit PCI domain, driver version with its zeros.
		gpus = append(gpus, fmt.Sprintf("%d, %s, %s, %d, 0000%s, %s", g.Index, g.UUID, g.ProductName, g.MemoryBytes>>20, strings.ToUpper(g.PCIBusID), inv.DriverVersion))
		for _, p := range g.MigProfiles {
			fmt.Fprintf(&lgip, "|   %d  MIG %-16s %3d     7/7        9.75       No     16     1     0   |\n|                                                             1     1     0   |\n", g.Index, p.Name, p.GIProfileID)
		}
	}
	if edit != nil {
		edit(gpus, &lgip)
	}
	slicesFile, gpusFile, lgipFile = filepath.Join(dir, "slices.yaml"), filepath.Join(dir, "gpus.csv"), filepath.Join(dir, "lgip.txt")
	for f, data := range map[string]string{slicesFile: y.String(), gpusFile: strings.Join(gpus, "\n") + "\n", lgipFile: lgip.String()} {
		if err := os.WriteFile(f, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return slicesFile, gpusFile, lgipFile
}

func TestSmokeCompareAgreesWithNvidiaSmi(t *testing.T) {
	s, g, l := smokeFiles(t, nil)
	var out bytes.Buffer
	r := &report{out: &out}
	smokeCompare(r, s, g, l)
	if f := failures(r); len(f) > 0 {
		t.Fatalf("failures: %v\n%s", f, out.String())
	}
	st := statuses(r)
	for _, want := range []string{"GPU 0 uuid", "GPU 0 name", "GPU 0 memory", "GPU 0 PCI bus ID", "GPU 0 driver version", "GPU 1 uuid", "GPU 0 MIG profile names", "GPU 0 MIG profile IDs"} {
		if st[want] != "PASS" {
			t.Errorf("%s: %q\n%s", want, st[want], out.String())
		}
	}
}

func TestSmokeCompareFindsDifferences(t *testing.T) {
	s, g, l := smokeFiles(t, func(gpus []string, lgip *strings.Builder) {
		f := strings.Split(gpus[1], ", ")
		f[3] = "40960"                  // memory
		f[4] = "00000000:AA:00.0"       // bus ID
		f[5] = "580.65.06"              // driver
		gpus[1] = strings.Join(f, ", ") // name and uuid kept
		// nvidia-smi numbers the profiles differently from what was published
		text := lgip.String()
		lgip.Reset()
		lgip.WriteString(strings.NewReplacer("MIG 1g.10gb+me", "MIG 1g.10gb+gfx").Replace(text))
	})
	// Rewrite every profile ID in the table to one no GPU has.
	data, _ := os.ReadFile(l)
	var lines []string
	for _, line := range strings.Split(string(data), "\n") {
		if m := lgipRow.FindStringSubmatchIndex(line); m != nil {
			line = line[:m[6]] + "99" + line[m[7]:]
		}
		lines = append(lines, line)
	}
	if err := os.WriteFile(l, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := &report{out: &out}
	smokeCompare(r, s, g, l)
	st := statuses(r)
	for check, want := range map[string]string{
		"GPU 0 memory": "PASS", "GPU 1 memory": "FAIL", "GPU 1 PCI bus ID": "FAIL", "GPU 1 driver version": "FAIL",
		"GPU 0 MIG profile names": "FAIL", "GPU 0 MIG profile IDs": "FAIL",
	} {
		if st[check] != want {
			t.Errorf("%s = %q, want %s\n%s", check, st[check], want, out.String())
		}
	}
	if r.err() == nil {
		t.Error("failures but no error")
	}
}

func TestSmokeCompareSkipsMigWhereNvidiaSmiHasNoTable(t *testing.T) {
	s, g, l := smokeFiles(t, nil)
	if err := os.WriteFile(l, []byte("No MIG-enabled devices found.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := &report{out: &out}
	smokeCompare(r, s, g, l)
	if st := statuses(r); st["MIG profiles"] != "SKIP" || r.err() != nil {
		t.Errorf("MIG profiles %q, err %v\n%s", st["MIG profiles"], r.err(), out.String())
	}
}

// The prepare check on a fake node: simulated NVML, but the real driver
// backend, real nvcdi under a fake driver root, the real plugin over its
// kubelet socket, and an nvidia-cdi-hook stand-in.
func TestSmokePrepareOnAFakeDriverRoot(t *testing.T) {
	root := cditest.NewDriverRoot(t, simulate.DriverVersion, 2, true)
	hook := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	cditest.WriteHookStandIn(t, hook, cditest.HookSubcommands)
	var out bytes.Buffer
	r := &report{out: &out}
	smokePrepare(context.Background(), r, smokeOptions{driverRoot: root.Dir, hook: hook, simulate: "h100x2", timeout: time.Minute})
	t.Log("\n" + out.String())
	if f := failures(r); len(f) > 0 {
		t.Fatalf("failures: %v\n%s", f, out.String())
	}
	st := statuses(r)
	for _, want := range []string{"NVML discovery", "plugin start", "prepare", "CDI device nodes exist", "CDI mount sources exist", "CDI hooks name the installed hook", "hook knows the spec's subcommands", "CDI spec applies", "unprepare", "no GPU setting changed"} {
		if st[want] != "PASS" {
			t.Errorf("%s: %q\n%s", want, st[want], out.String())
		}
	}
}

// A host hook from an older toolkit does not know newer subcommands: the
// check says which.
func TestSmokePrepareReportsAHookThatLacksSubcommands(t *testing.T) {
	root := cditest.NewDriverRoot(t, simulate.DriverVersion, 1, true)
	hook := filepath.Join(t.TempDir(), "nvidia-cdi-hook")
	cditest.WriteHookStandIn(t, hook, []string{"update-ldcache", "create-symlinks", "chmod"}) // v1.16-era
	var out bytes.Buffer
	r := &report{out: &out}
	smokePrepare(context.Background(), r, smokeOptions{driverRoot: root.Dir, hook: hook, simulate: "h100x1", timeout: time.Minute})
	if st := statuses(r); st["hook knows the spec's subcommands"] != "FAIL" || !strings.Contains(out.String(), "enable-cuda-compat") {
		t.Errorf("hook check %q\n%s", st["hook knows the spec's subcommands"], out.String())
	}
}
