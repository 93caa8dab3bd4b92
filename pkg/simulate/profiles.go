// Package simulate provides simulated NVIDIA GPUs for nodes without any:
// go-nvml's mock servers, wired for every NVML call this driver makes, with
// identities that are stable for a profile and node name and device files
// that live under a state directory instead of the host's /dev.
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

// models maps the model part of a profile name to go-nvml's GPU tables.
// Product names are those real GPUs report (the mock's A100-40GB name
// carries a "Mock" prefix that demo manifests would not match).
var models = map[string]gpus.Config{
	"a100-40gb": withName(gpus.A100_SXM4_40GB, "NVIDIA A100-SXM4-40GB"),
	"a100-80gb": gpus.A100_SXM4_80GB,
	"a30":       gpus.A30_PCIE_24GB,
	"h100":      gpus.H100_SXM5_80GB,
	"h200":      gpus.H200_SXM5_141GB,
	"b200":      gpus.B200_SXM5_180GB,
}

// MaxGPUs bounds a profile's GPU count; real nodes carry at most 16.
const MaxGPUs = 64

func withName(c gpus.Config, name string) gpus.Config {
	c.Name = name
	return c
}

// Profile is a parsed --simulate value such as "h100x8".
type Profile struct {
	Name  string
	Model string
	Count int
	GPU   gpus.Config
}

// ParseProfile parses "<model>x<count>", e.g. "a100-80gbx4".
func ParseProfile(s string) (Profile, error) {
	i := strings.LastIndex(s, "x")
	if i <= 0 {
		return Profile{}, fmt.Errorf("simulate profile %q: want <model>x<count>, e.g. h100x8; models: %s", s, strings.Join(ModelNames(), ", "))
	}
	model, countStr := s[:i], s[i+1:]
	cfg, ok := models[model]
	if !ok {
		return Profile{}, fmt.Errorf("simulate profile %q: unknown model %q; models: %s", s, model, strings.Join(ModelNames(), ", "))
	}
	count, err := strconv.Atoi(countStr)
	if err != nil || count < 1 || count > MaxGPUs {
		return Profile{}, fmt.Errorf("simulate profile %q: GPU count %q must be a number from 1 to %d", s, countStr, MaxGPUs)
	}
	return Profile{Name: s, Model: model, Count: count, GPU: cfg}, nil
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
