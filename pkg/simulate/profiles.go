// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package simulate provides simulated NVIDIA GPUs for nodes without any:
// go-nvml's mock servers, wired for every NVML call this driver makes with
// the answers real hardware gives (profile IDs, MIG mode semantics, SM
// counts, errors), identities that are stable for a profile and node name,
// and device files that live under a state directory instead of the host's
// /dev.
package simulate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// Driver versions the simulated node reports.
const (
	DriverVersion     = "570.133.20"
	NVMLVersion       = "12.570.133.20"
	CudaDriverVersion = 12080
)

// models maps the model part of a profile name to its hardware tables
// (models.go).
var models = map[string]model{
	"a100-40gb": a100_40gb,
	"a100-80gb": a100_80gb,
	"a30":       a30,
	"h100":      h100,
	"h200":      h200,
	"b200":      b200,
	"gh200":     gh200,
}

// MaxGPUs bounds a profile's GPU count; real nodes carry at most 16.
const MaxGPUs = 64

// MigSuffix, appended to a profile ("a100-80gbx4:mig"), starts every GPU
// with MIG mode enabled, as an admin would have set it. On Ampere GPUs,
// whose MIG mode only changes with a GPU reset, that is the only way they
// offer MIG devices.
const MigSuffix = ":mig"

// Profile is a parsed --simulate value such as "h100x8". Name is the
// value without the MIG suffix: identities derive from it, so the same node
// with MIG mode on has the same GPUs.
type Profile struct {
	Name  string
	Model string
	Count int
	GPU   gpus.Config
	// MigEnabled starts GPUs without a recorded state in MIG mode, and
	// turns MIG mode on where the recorded state was written under a
	// profile without it (and off the other way round; profile_mode.go).
	MigEnabled bool
	hw         model
}

// ParseProfile parses "<model>x<count>[:mig]", e.g. "a100-80gbx4".
func ParseProfile(s string) (Profile, error) {
	base, migEnabled := strings.CutSuffix(s, MigSuffix)
	i := strings.LastIndex(base, "x")
	if i <= 0 {
		return Profile{}, fmt.Errorf("simulate profile %q: want <model>x<count>[%s], e.g. h100x8; models: %s", s, MigSuffix, strings.Join(ModelNames(), ", "))
	}
	name, countStr := base[:i], base[i+1:]
	m, ok := models[name]
	if !ok {
		return Profile{}, fmt.Errorf("simulate profile %q: unknown model %q; models: %s", s, name, strings.Join(ModelNames(), ", "))
	}
	count, err := strconv.Atoi(countStr)
	if err != nil || count < 1 || count > MaxGPUs {
		return Profile{}, fmt.Errorf("simulate profile %q: GPU count %q must be a number from 1 to %d", s, countStr, MaxGPUs)
	}
	cfg := m.config
	cfg.MIGProfiles = m.migProfiles()
	return Profile{Name: base, Model: name, Count: count, GPU: cfg, MigEnabled: migEnabled, hw: m}, nil
}

// ModelNames lists the models a profile may name.
func ModelNames() []string {
	names := make([]string, 0, len(models))
	for n := range models {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
