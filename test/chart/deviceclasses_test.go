// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/deployments/static"
)

// The chart templates the DeviceClasses; deployments/static/deviceclasses.yaml
// is what the binaries embed and the allocator tests use. They must not drift.
func TestChartDeviceClassesMatchTheEmbeddedOnes(t *testing.T) {
	out, err := exec.Command(helmBinary(t), "template", "gpu-dra-driver", chartDir,
		"--namespace", "gpu-dra-driver", "--kube-version", "v1.37.2",
		"--show-only", "templates/deviceclasses.yaml").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	rendered := map[string]resourceapi.DeviceClassSpec{}
	for _, doc := range strings.Split(string(out), "\n---") {
		if !strings.Contains(doc, "kind: DeviceClass") {
			continue
		}
		var dc resourceapi.DeviceClass
		if err := yaml.UnmarshalStrict([]byte(doc), &dc); err != nil {
			t.Fatalf("rendered DeviceClass: %v\n%s", err, doc)
		}
		rendered[dc.Name] = dc.Spec
	}
	embedded, err := static.DeviceClasses()
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) != len(rendered) {
		t.Errorf("chart renders %d DeviceClasses, deployments/static has %d", len(rendered), len(embedded))
	}
	for _, dc := range embedded {
		spec, ok := rendered[dc.Name]
		if !ok {
			t.Errorf("DeviceClass %s is in deployments/static but not in the chart", dc.Name)
			continue
		}
		if !reflect.DeepEqual(spec, dc.Spec) {
			t.Errorf("DeviceClass %s differs:\nchart:  %+v\nstatic: %+v", dc.Name, spec, dc.Spec)
		}
	}
}
