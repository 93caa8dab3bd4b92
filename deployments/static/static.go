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

// MigProfileClass is the DeviceClass the chart renders for one MIG profile
// (templates/mig-extended-resources.yaml; test/chart checks every rendered
// one against this): MIG devices of that profile, and the device plugin's
// extended resource name for them, nvidia.com/mig-<profile> with "+" as
// ".". Its one selector carries the profile, so a claim of this class
// needs no selector of its own: the scheduler evaluates one CEL expression
// per device instead of two (docs/performance.md, "Busy fleets").
func MigProfileClass(driverName, profile string) *resourceapi.DeviceClass {
	resource := "mig-" + strings.ReplaceAll(profile, "+", ".")
	extended := "nvidia.com/" + resource
	expr := fmt.Sprintf("device.driver == '%[1]s' && device.attributes['%[1]s'].type == 'mig' && device.attributes['%[1]s'].profile == '%[2]s'", driverName, profile)
	dc := &resourceapi.DeviceClass{Spec: resourceapi.DeviceClassSpec{
		Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}},
		ExtendedResourceName: &extended,
	}}
	dc.Name = resource + "." + strings.TrimPrefix(driverName, "gpu.")
	return dc
}
