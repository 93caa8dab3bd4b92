package v1beta1

import (
	"encoding/json"
	"fmt"
	"strings"

	sigsjson "sigs.k8s.io/json"
)

// Decode strictly decodes one opaque config object. The error names the
// offending field (unknown fields, wrong types, wrong apiVersion or kind)
// so that the user can fix the claim without reading driver logs.
func Decode(raw []byte) (Config, error) {
	var meta TypeMeta
	if err := json.Unmarshal(raw, &meta); err != nil {
		return nil, fmt.Errorf("config is not a JSON object: %w", err)
	}
	if meta.APIVersion != GroupVersion {
		return nil, fmt.Errorf("apiVersion: got %q, want %q", meta.APIVersion, GroupVersion)
	}
	var cfg Config
	switch meta.Kind {
	case GpuConfigKind:
		cfg = &GpuConfig{}
	case MigDeviceConfigKind:
		cfg = &MigDeviceConfig{}
	default:
		return nil, fmt.Errorf("kind: unknown kind %q; use %s or %s", meta.Kind, GpuConfigKind, MigDeviceConfigKind)
	}
	strictErrs, err := sigsjson.UnmarshalStrict(raw, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", meta.Kind, err)
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, 0, len(strictErrs))
		for _, e := range strictErrs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("%s: %s", meta.Kind, strings.Join(msgs, "; "))
	}
	return cfg, nil
}
