// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
)

const metadataNS = "gpu-metadata"

// metadataCase is one container and the metadata file it should find.
type metadataCase struct {
	pod, container, request string
	// template: the claim comes from a ResourceClaimTemplate, so the file
	// is under resourceclaimtemplates/<pod claim name>.
	template bool
	// profile is the MIG profile of a MIG device; "" for a GPU.
	profile string
	// sharing is the sharingStrategy attribute wanted ("" for none), and
	// interval the timeSlicingInterval.
	sharing, interval string
	// share is the memoryShare attribute wanted, in bytes (0: none).
	share int64
}

// TestDeviceMetadata: containers read the metadata file the plugin writes
// (KEP-5304) under /var/run/kubernetes.io/dra-device-attributes and find
// the UUID that nvidia-smi -L shows them, for a whole GPU, dynamic MIG
// devices, a time-sliced GPU (a named claim) and an MPS memory share.
func TestDeviceMetadata(t *testing.T) {
	testNamespace(t, metadataNS)
	pods := []string{"whole", "mig-pair", "time-sliced", "fraction"}
	applyYAML(t, workloadSpecs(metadataNS, pods...))
	waitRunningIn(t, metadataNS, pods...)

	cases := []metadataCase{
		{pod: "whole", container: "ctr", request: "gpu", template: true},
		{pod: "mig-pair", container: "small", request: "small", template: true, profile: "1g.10gb"},
		{pod: "mig-pair", container: "big", request: "big", template: true, profile: "3g.40gb"},
		{pod: "time-sliced", container: "ctr", request: "gpu", sharing: "TimeSlicing", interval: "Long"},
		{pod: "fraction", container: "ctr", request: "gpu", template: true, sharing: "MPS", share: 20 << 30},
	}
	for _, c := range cases {
		t.Run(c.pod+"/"+c.container, func(t *testing.T) { checkMetadata(t, c) })
	}
}

func checkMetadata(t *testing.T, c metadataCase) {
	_, gpuUUID, migs := gpuOfIn(t, metadataNS, c.pod, c.container)
	claim := claimOf(t, metadataNS, c.pod, "gpu")
	path := metadata.ResourceClaimFilePath(driverName, claim, c.request)
	if c.template {
		path = metadata.ResourceClaimTemplateFilePath(driverName, "gpu", c.request)
	}
	var raw string
	waitFor(t, "metadata file "+path+" in "+c.pod+"/"+c.container, 30*time.Second, func() (bool, string) {
		out, err := exec.Command("kubectl", "-n", metadataNS, "exec", c.pod, "-c", c.container, "--", "cat", path).CombinedOutput()
		raw = string(out)
		return err == nil, raw
	})
	t.Logf("%s in %s/%s:\n%s", path, c.pod, c.container, raw)

	var dm metadata.DeviceMetadata
	var invalid error
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(strings.NewReader(raw)), &dm, devicemetadata.DecodeMetadataWithValidationResult(&invalid)); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if invalid != nil {
		t.Errorf("%s does not validate: %v", path, invalid)
	}
	if dm.Name != claim || len(dm.Requests) != 1 || dm.Requests[0].Name != c.request || len(dm.Requests[0].Devices) != 1 {
		t.Fatalf("%s: claim %s request %s wanted, got %+v", path, claim, c.request, dm)
	}
	if c.template && (dm.PodClaimName == nil || *dm.PodClaimName != "gpu") {
		t.Errorf("podClaimName %v, want gpu", dm.PodClaimName)
	}
	d := dm.Requests[0].Devices[0]
	if want := allocatedDevices(t, metadataNS, claim)[c.request]; d.Driver != driverName || d.Name != want {
		t.Errorf("metadata names device %s/%s, the claim has %s", d.Driver, d.Name, want)
	}
	str := func(name string) string {
		if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	num := func(name string) int64 {
		if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && a.IntValue != nil {
			return *a.IntValue
		}
		return 0
	}

	if c.profile == "" {
		if got := str("uuid"); got != gpuUUID {
			t.Errorf("metadata uuid %q, nvidia-smi -L shows %q", got, gpuUUID)
		}
	} else {
		want := ""
		for _, m := range migs {
			if strings.HasPrefix(m, c.profile+"=") {
				want = strings.TrimPrefix(m, c.profile+"=")
			}
		}
		if len(migs) != 1 || want == "" || str("uuid") != want {
			t.Errorf("metadata uuid %q, nvidia-smi -L shows MIG devices %v (want one %s)", str("uuid"), migs, c.profile)
		}
		if got := str("parentUUID"); got != gpuUUID {
			t.Errorf("parentUUID %q, nvidia-smi -L shows GPU %q", got, gpuUUID)
		}
		if got := str("profile"); got != c.profile {
			t.Errorf("profile %q, want %q", got, c.profile)
		}
	}
	if str("productName") == "" || num("memory") <= 0 {
		t.Errorf("productName %q, memory %d", str("productName"), num("memory"))
	}
	if got := str("sharingStrategy"); got != c.sharing {
		t.Errorf("sharingStrategy %q, want %q", got, c.sharing)
	}
	if got := str("timeSlicingInterval"); got != c.interval {
		t.Errorf("timeSlicingInterval %q, want %q", got, c.interval)
	}
	if got := num("memoryShare"); got != c.share {
		t.Errorf("memoryShare %d, want %d", got, c.share)
	}
}
