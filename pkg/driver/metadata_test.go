// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// containerMetadata prepares claim as the kubelet does, applies every CDI
// device the plugin returned the way the container runtime would, and
// reads the metadata file the container would see at its well-known path.
func (n *node) containerMetadata(t *testing.T, claim *resourceapi.ResourceClaim) metadata.Device {
	t.Helper()
	d, _ := n.metadataOf(t, claim, n.allCDIIDs(claim))
	return d
}

// metadataOf applies the CDI devices ids, as the container runtime does
// when it (re)starts a container of claim, and reads the metadata file the
// container sees; it returns the file's device and generation.
func (n *node) metadataOf(t *testing.T, claim *resourceapi.ResourceClaim, ids []string) (metadata.Device, int64) {
	t.Helper()
	spec := inject(t, n.dir("cdi"), ids...)
	want := metadata.ResourceClaimFilePath(testDriver, claim.Name, "gpu")
	if pc, ok := claim.Annotations[resourceapi.PodResourceClaimAnnotation]; ok {
		want = metadata.ResourceClaimTemplateFilePath(testDriver, pc, "gpu")
	}
	var source string
	for _, m := range spec.Mounts {
		if m.Destination == want {
			source = m.Source
		}
	}
	if source == "" {
		t.Fatalf("claim %s: no mount at %s; mounts %v", claim.Name, want, mountTargets(spec))
	}
	f, err := os.Open(source)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		dm       metadata.DeviceMetadata
		gvk      schema.GroupVersionKind
		validErr error
	)
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(f), &dm,
		devicemetadata.DecodeMetadataStoreGVKResult(&gvk), devicemetadata.DecodeMetadataWithValidationResult(&validErr)); err != nil {
		t.Fatalf("claim %s: decode %s: %v", claim.Name, source, err)
	}
	if validErr != nil {
		t.Errorf("claim %s: metadata does not validate: %v", claim.Name, validErr)
	}
	if gvk.GroupVersion() != metadatav1beta1.SchemeGroupVersion {
		t.Errorf("claim %s: first metadata object is %v, want %v", claim.Name, gvk, metadatav1beta1.SchemeGroupVersion)
	}
	if dm.Name != claim.Name || dm.UID != claim.UID || len(dm.Requests) != 1 || dm.Requests[0].Name != "gpu" || len(dm.Requests[0].Devices) != 1 {
		t.Fatalf("claim %s: metadata %+v", claim.Name, dm)
	}
	d := dm.Requests[0].Devices[0]
	if d.Driver != testDriver || d.Pool != testNode || d.Name != claim.Status.Allocation.Devices.Results[0].Device {
		t.Errorf("claim %s: metadata names device %s/%s/%s", claim.Name, d.Driver, d.Pool, d.Name)
	}
	return d, dm.Generation
}

// attrString and attrInt read one attribute; "" or -1 when absent.
func attrString(d metadata.Device, name string) string {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

func attrInt(d metadata.Device, name string) int64 {
	if a, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok && a.IntValue != nil {
		return *a.IntValue
	}
	return -1
}

// requirePublished checks that every attribute the ResourceSlice publishes
// for the device is in its metadata, under the same (qualified) name, with
// the same value.
func requirePublished(t *testing.T, n *node, d metadata.Device) {
	t.Helper()
	var found bool
	for _, s := range n.publishedSlices() {
		for _, pub := range s.Spec.Devices {
			if pub.Name != d.Name {
				continue
			}
			found = true
			for name, a := range pub.Attributes {
				got, ok := d.Attributes[name]
				if !ok {
					t.Errorf("%s: published attribute %s missing from metadata", d.Name, name)
					continue
				}
				if !equalAttr(a, got) {
					t.Errorf("%s: attribute %s is %v in metadata, %v in the slice", d.Name, name, got, a)
				}
			}
		}
	}
	if !found {
		t.Fatalf("device %s not published", d.Name)
	}
}

func equalAttr(a, b resourceapi.DeviceAttribute) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func requireNoSharing(t *testing.T, d metadata.Device) {
	t.Helper()
	for _, name := range []string{MetaAttrSharingStrategy, MetaAttrTimeSlicingInterval, MetaAttrMPSActiveThreadPercent, MetaAttrMPSPinnedMemoryLimit, MetaAttrMemoryShare} {
		if _, ok := d.Attributes[resourceapi.QualifiedName(name)]; ok {
			t.Errorf("%s: exclusive device has sharing attribute %s", d.Name, name)
		}
	}
}

func TestDeviceMetadataWholeGPU(t *testing.T) {
	n := newNode(t, "h100x2")
	g := n.driver.cfg.Backend.Inventory.GPUs[1]
	claim := n.claim("whole", []string{"gpu-1"})
	d := n.containerMetadata(t, claim)
	if got := attrString(d, "uuid"); got != g.UUID {
		t.Errorf("uuid %q, want %q", got, g.UUID)
	}
	if got := attrString(d, "productName"); got != g.ProductName || got == "" {
		t.Errorf("productName %q, want %q", got, g.ProductName)
	}
	if got := attrInt(d, "memory"); got != int64(g.MemoryBytes) {
		t.Errorf("memory %d, want %d", got, g.MemoryBytes)
	}
	if g.PCIBusID != "" && attrString(d, "resource.kubernetes.io/pciBusID") != g.PCIBusID {
		t.Errorf("pciBusID %q, want %q", attrString(d, "resource.kubernetes.io/pciBusID"), g.PCIBusID)
	}
	requirePublished(t, n, d)
	requireNoSharing(t, d)

	// Unprepare removes the file and its CDI spec.
	spec := inject(t, n.dir("cdi"), n.allCDIIDs(claim)...)
	n.unprepare(claim)
	for _, m := range spec.Mounts {
		if m.Destination == metadata.ResourceClaimFilePath(testDriver, claim.Name, "gpu") {
			if _, err := os.Stat(m.Source); !os.IsNotExist(err) {
				t.Errorf("metadata file %s left after unprepare: %v", m.Source, err)
			}
		}
	}
}

func TestDeviceMetadataDynamicMIG(t *testing.T) {
	n := newMigNode(t, "h100x1")
	g := n.driver.cfg.Backend.Inventory.GPUs[0]
	claim := n.claim("mig", []string{"gpu-0-mig-1g10gb-19-0"})
	d := n.containerMetadata(t, claim)
	rec, ok := n.driver.state.Ledger.Get(claim.UID)
	if !ok {
		t.Fatal("no record")
	}
	uuid := attrString(d, "uuid")
	if !strings.HasPrefix(uuid, "MIG-") || uuid != rec.Devices[0].UUID {
		t.Errorf("uuid %q, want the created MIG device's %q", uuid, rec.Devices[0].UUID)
	}
	if got := attrString(d, "parentUUID"); got != g.UUID {
		t.Errorf("parentUUID %q, want %q", got, g.UUID)
	}
	if got := attrString(d, "profile"); got != "1g.10gb" {
		t.Errorf("profile %q, want 1g.10gb", got)
	}
	if got := attrString(d, "type"); got != "mig" {
		t.Errorf("type %q, want mig", got)
	}
	prof := profileByName(t, g.MigProfiles, "1g.10gb")
	if got, want := attrInt(d, "memory"), int64(prof.Info.MemorySizeMB)<<20; got != want {
		t.Errorf("memory %d, want the profile's %d", got, want)
	}
	if got := attrString(d, "productName"); got != g.ProductName {
		t.Errorf("productName %q, want %q", got, g.ProductName)
	}
	// What the MIG device does not publish (resourceslices.MigDetails) is
	// in its metadata: placement, parent minor, engines, driver version.
	for name, want := range map[string]int64{"placementStart": 0, "placementSize": 1, "parentMinor": 0, "decoders": int64(prof.Info.DecoderCount), "copyEngines": int64(prof.Info.CopyEngineCount)} {
		if got := attrInt(d, name); got != want {
			t.Errorf("%s %d, want %d", name, got, want)
		}
	}
	if v := d.Attributes["driverVersion"].VersionValue; v == nil || *v != n.driver.cfg.Backend.Inventory.DriverVersion {
		t.Errorf("driverVersion %v, want the node's %q", v, n.driver.cfg.Backend.Inventory.DriverVersion)
	}
	requirePublished(t, n, d)
	requireNoSharing(t, d)
	n.unprepare(claim)
}

// Issue 28, defect 7: a monitor device's metadata has the type its
// ResourceSlice publishes (monitor), not its record's config type (gpu).
func TestDeviceMetadataMonitorType(t *testing.T) {
	n := newNode(t, "h100x1")
	g := n.driver.cfg.Backend.Inventory.GPUs[0]
	claim := n.adminClaim("watch", []string{"gpu-0-monitor"})
	d := n.containerMetadata(t, claim)
	if got := attrString(d, "type"); got != deviceattr.TypeMonitor {
		t.Errorf("type %q, want %q as published", got, deviceattr.TypeMonitor)
	}
	if got := attrString(d, "uuid"); got != g.UUID {
		t.Errorf("uuid %q, want the GPU's %q", got, g.UUID)
	}
	requirePublished(t, n, d)
	requireNoSharing(t, d)
	n.unprepare(claim)
}

func TestDeviceMetadataTimeSlicing(t *testing.T) {
	n := newNode(t, "h100x1")
	claim := n.claim("ts", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Medium"}}}`)
	d := n.containerMetadata(t, claim)
	if got := attrString(d, MetaAttrSharingStrategy); got != "TimeSlicing" {
		t.Errorf("sharingStrategy %q, want TimeSlicing", got)
	}
	if got := attrString(d, MetaAttrTimeSlicingInterval); got != "Medium" {
		t.Errorf("timeSlicingInterval %q, want Medium", got)
	}
	if attrString(d, "uuid") != n.driver.cfg.Backend.Inventory.GPUs[0].UUID {
		t.Errorf("uuid %q", attrString(d, "uuid"))
	}
	for _, name := range []string{MetaAttrMPSActiveThreadPercent, MetaAttrMPSPinnedMemoryLimit, MetaAttrMemoryShare} {
		if attrInt(d, name) != -1 {
			t.Errorf("time-sliced device has %s", name)
		}
	}
	requirePublished(t, n, d)
	n.unprepare(claim)
}

func TestDeviceMetadataMPSShare(t *testing.T) {
	n := newSharingNode(t, "h100x1")
	g := n.driver.cfg.Backend.Inventory.GPUs[0]
	claim := n.sharedClaim("share", "gpu-0", "20Gi", "30")
	d := n.containerMetadata(t, claim)
	if got := attrString(d, MetaAttrSharingStrategy); got != "MPS" {
		t.Errorf("sharingStrategy %q, want MPS", got)
	}
	if got := attrInt(d, MetaAttrMemoryShare); got != 20<<30 {
		t.Errorf("memoryShare %d, want %d", got, int64(20<<30))
	}
	if got := attrInt(d, MetaAttrMPSPinnedMemoryLimit); got != 20<<30 {
		t.Errorf("mpsPinnedMemoryLimit %d, want %d", got, int64(20<<30))
	}
	if got := attrInt(d, MetaAttrMPSActiveThreadPercent); got != 30 {
		t.Errorf("mpsActiveThreadPercentage %d, want 30", got)
	}
	if got := attrInt(d, "memory"); got != int64(g.MemoryBytes) {
		t.Errorf("memory %d, want the GPU's %d", got, g.MemoryBytes)
	}
	if attrString(d, "uuid") != g.UUID {
		t.Errorf("uuid %q, want %q", attrString(d, "uuid"), g.UUID)
	}
	if _, ok := d.Attributes[MetaAttrTimeSlicingInterval]; ok {
		t.Error("an MPS share has a time-slicing interval")
	}
	requirePublished(t, n, d)
	n.unprepare(claim)
}

// MPS set by config on a whole GPU: limits, but no memory share.
func TestDeviceMetadataMPSConfig(t *testing.T) {
	n := newNode(t, "h100x1")
	claim := n.claim("mps", []string{"gpu-0"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50,"defaultPinnedDeviceMemoryLimit":"10Gi"}}}`)
	d := n.containerMetadata(t, claim)
	if attrString(d, MetaAttrSharingStrategy) != "MPS" || attrInt(d, MetaAttrMPSActiveThreadPercent) != 50 || attrInt(d, MetaAttrMPSPinnedMemoryLimit) != 10<<30 {
		t.Errorf("MPS attributes %v", d.Attributes)
	}
	if attrInt(d, MetaAttrMemoryShare) != -1 {
		t.Error("a whole GPU under MPS has a memoryShare")
	}
	n.unprepare(claim)
}

// A device prepare has no record of gets no metadata rather than a wrong one.
func TestDeviceMetadataNeedsARecord(t *testing.T) {
	m := &deviceMetadata{published: map[string]resourceslices.Entry{}}
	devs := []kubeletplugin.Device{
		{Requests: []string{"a"}, PoolName: "p", DeviceName: "gpu-0"},
		{Requests: []string{"b"}, PoolName: "p", DeviceName: "gpu-1"},
	}
	// Out of order: matched by name and request, not position.
	recs := []checkpoint.PreparedDevice{{Requests: []string{"b"}, Pool: "p", Device: "gpu-1", UUID: "GPU-1"}}
	m.attach(devs, recs)
	if devs[0].Metadata != nil {
		t.Errorf("gpu-0 has no record but got metadata %+v", devs[0].Metadata)
	}
	if devs[1].Metadata == nil || *devs[1].Metadata.Attributes["uuid"].StringValue != "GPU-1" {
		t.Errorf("gpu-1 metadata %+v", devs[1].Metadata)
	}
}

// A claim the plugin unprepares by itself (deleted while it was down)
// never reaches the helper's cleanup: the next start removes its metadata
// and keeps that of claims still prepared.
func TestDeviceMetadataOfUnpreparedClaimsIsSwept(t *testing.T) {
	n := newNode(t, "h100x2")
	gone, kept := n.claim("gone", []string{"gpu-0"}), n.claim("kept", []string{"gpu-1"})
	n.mustPrepare(gone)
	n.mustPrepare(kept)
	specs := func(c *resourceapi.ResourceClaim) []string {
		m, _ := filepath.Glob(filepath.Join(n.dir("cdi"), testDriver+"_metadata_"+string(c.UID)+"_*.json"))
		return m
	}
	file := func(c *resourceapi.ResourceClaim) string {
		return filepath.Join(n.dir("plugin"), metadataSubDir, c.Namespace+"_"+c.Name, "gpu", "metadata.json")
	}
	for _, c := range []*resourceapi.ResourceClaim{gone, kept} {
		if _, err := os.Stat(file(c)); err != nil || len(specs(c)) != 1 {
			t.Fatalf("claim %s: metadata file %v, specs %v", c.Name, err, specs(c))
		}
	}
	// As the stale-claim cleanup does: past the helper.
	if err := n.driver.state.Unprepare(context.Background(), kubeletplugin.NamespacedObject{UID: gone.UID, NamespacedName: types.NamespacedName{Namespace: gone.Namespace, Name: gone.Name}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(file(gone)); err != nil {
		t.Fatalf("the helper was bypassed, yet the metadata is gone: %v", err)
	}
	// A spec of another driver's kind in the same name space stays.
	foreign := filepath.Join(n.dir("cdi"), testDriver+"_metadata_other.json")
	if err := os.WriteFile(foreign, []byte(`{"cdiVersion":"0.5.0","kind":"example.com/metadata","devices":[{"name":"x_y","containerEdits":{}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	n.restart("h100x2")
	if _, err := os.Stat(file(gone)); !os.IsNotExist(err) || len(specs(gone)) != 0 {
		t.Errorf("metadata of the unprepared claim left after restart: file %v, specs %v", err, specs(gone))
	}
	if _, err := os.Stat(file(kept)); err != nil || len(specs(kept)) != 1 {
		t.Errorf("metadata of the prepared claim removed: file %v, specs %v", err, specs(kept))
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("a spec the helper did not write was removed: %v", err)
	}
	n.unprepare(kept)
	if _, err := os.Stat(file(kept)); !os.IsNotExist(err) || len(specs(kept)) != 0 {
		t.Errorf("unprepare left metadata: file %v, specs %v", err, specs(kept))
	}
}
