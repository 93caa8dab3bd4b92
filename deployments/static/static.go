// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package static holds the manifests that are not templated, embedded so
// that the binaries that need them (gpudra's offline demo and smoke test)
// work wherever they ship, not only from a source checkout. The Helm chart
// templates the same DeviceClasses; test/chart checks that they agree.
package static

import (
	_ "embed"
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"
)

//go:embed deviceclasses.yaml
var deviceClassesYAML string

// DeviceClasses decodes the shipped DeviceClasses, strictly.
func DeviceClasses() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for i, doc := range strings.Split(deviceClassesYAML, "\n---\n") {
		var dc resourceapi.DeviceClass
		if err := yaml.UnmarshalStrict([]byte(doc), &dc); err != nil {
			return nil, fmt.Errorf("deviceclasses.yaml document %d: %w", i, err)
		}
		out = append(out, &dc)
	}
	return out, nil
}
