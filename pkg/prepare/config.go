package prepare

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
)

// opaqueConfig is one decoded config entry of an allocation.
type opaqueConfig struct {
	index    int
	source   resourceapi.AllocationConfigSource
	requests []string
	config   configapi.Config
}

// decodeConfigs returns this driver's configs in precedence order:
// DeviceClass configs before claim configs, and within each the order of
// the claim, so that a later entry overrides an earlier one. Configs for
// other drivers are ignored.
func decodeConfigs(driverName string, configs []resourceapi.DeviceAllocationConfiguration) ([]opaqueConfig, error) {
	var out []opaqueConfig
	for i, c := range configs {
		if c.Opaque == nil || c.Opaque.Driver != driverName {
			continue
		}
		cfg, err := configapi.Decode(c.Opaque.Parameters.Raw)
		if err != nil {
			return nil, fmt.Errorf("devices.config[%d] (from %s): %w", i, describeSource(c.Source), err)
		}
		out = append(out, opaqueConfig{index: i, source: c.Source, requests: c.Requests, config: cfg})
	}
	sort.SliceStable(out, func(a, b int) bool {
		return out[a].source == resourceapi.AllocationConfigSourceClass && out[b].source != resourceapi.AllocationConfigSourceClass
	})
	return out, nil
}

func describeSource(s resourceapi.AllocationConfigSource) string {
	if s == resourceapi.AllocationConfigSourceClass {
		return "DeviceClass"
	}
	return "claim"
}

// configFor picks the config that applies to one allocated device (the last
// matching one) or the default for its type, then normalizes and validates
// it for that device.
func configFor(configs []opaqueConfig, request string, t configapi.DeviceType) (configapi.Config, error) {
	var chosen *opaqueConfig
	for i := range configs {
		if matchesRequest(configs[i].requests, request) {
			chosen = &configs[i]
		}
	}
	if chosen == nil {
		return configapi.DefaultConfigFor(t), nil
	}
	cfg := chosen.config
	where := fmt.Sprintf("devices.config[%d] (from %s)", chosen.index, describeSource(chosen.source))
	if err := cfg.AppliesTo(t); err != nil {
		return nil, fmt.Errorf("%s for request %q: %w", where, request, err)
	}
	cfg.Normalize()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", where, cfg.Kind(), err)
	}
	return cfg, nil
}

// matchesRequest reports whether a config's request list selects the
// allocated request, which may be "request/subrequest".
func matchesRequest(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	for _, r := range requests {
		if r == request || r == parent {
			return true
		}
	}
	return false
}
