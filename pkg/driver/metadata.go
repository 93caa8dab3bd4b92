// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatav1beta1 "k8s.io/dynamic-resource-allocation/api/metadata/v1beta1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"tags.cncf.io/container-device-interface/pkg/parser"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// Device metadata (KEP-5304): the kubelet plugin helper writes, per
// prepared request, a file that a CDI mount puts into the containers under
// /var/run/kubernetes.io/dra-device-attributes. The helper does all of it
// through CDI: the kubelet only passes one more CDI device ID to the
// container runtime, so kubelets of any version (and no feature gate)
// work with it.
//
// Each device's attributes are what its ResourceSlice publishes, under the
// same names, plus what exists only once it is prepared: the UUID of a MIG
// device created at prepare, its memory, and the sharing in force.

// metadataVersions are the metadata API versions each file holds, newest
// first. Named explicitly (see kubeletplugin.EnableDeviceMetadata): a new
// version is added here, not picked up silently.
var metadataVersions = []schema.GroupVersion{metadatav1beta1.SchemeGroupVersion}

// Attributes that only a prepared device has. They are unqualified, so in
// the driver's domain like the published ones; memory has the name of the
// published capacity. Sharing attributes are absent on a device used
// exclusively.
const (
	MetaAttrMemory                 = deviceattr.CapMemory
	MetaAttrSharingStrategy        = "sharingStrategy"
	MetaAttrTimeSlicingInterval    = "timeSlicingInterval"
	MetaAttrMPSActiveThreadPercent = "mpsActiveThreadPercentage"
	MetaAttrMPSPinnedMemoryLimit   = "mpsPinnedMemoryLimit"
	MetaAttrMemoryShare            = "memoryShare"
)

// deviceMetadata builds the metadata of prepared devices from the devices
// the node publishes.
type deviceMetadata struct {
	inv       *nvdev.Inventory
	published map[string]resourceslices.Entry
}

func newDeviceMetadata(inv *nvdev.Inventory, table resourceslices.Table) *deviceMetadata {
	m := &deviceMetadata{inv: inv, published: make(map[string]resourceslices.Entry, len(table.Entries))}
	for _, e := range append(slices.Clip(table.Entries), table.Aliases()...) {
		m.published[e.Device.Name] = e
	}
	return m
}

// attach sets the metadata of each device that prepare returned, from the
// claim's checkpoint record. A device without a record keeps none.
func (m *deviceMetadata) attach(devices []kubeletplugin.Device, records []checkpoint.PreparedDevice) {
	for i := range devices {
		if rec, ok := recordOf(devices, records, i); ok {
			devices[i].Metadata = &kubeletplugin.DeviceMetadata{Attributes: m.attributes(rec)}
		}
	}
}

// recordOf finds the record of devices[i]. Prepare returns devices in
// record order; matching by pool, name and requests keeps it right if
// that ever changes.
func recordOf(devices []kubeletplugin.Device, records []checkpoint.PreparedDevice, i int) (checkpoint.PreparedDevice, bool) {
	d := devices[i]
	same := func(r checkpoint.PreparedDevice) bool {
		return r.Pool == d.PoolName && r.Device == d.DeviceName && slices.Equal(r.Requests, d.Requests)
	}
	if len(records) == len(devices) && same(records[i]) {
		return records[i], true
	}
	for _, r := range records {
		if same(r) {
			return r, true
		}
	}
	return checkpoint.PreparedDevice{}, false
}

// entryOf is the published entry of a recorded device's own hardware
// (issue 47): the entry of its name when that is the recorded GPU (the
// parent of a MIG device, at the recorded placement), else the one that
// is, published under another name (the GPUs were renumbered by a reboot
// or a driver reload). None when the node publishes its hardware under no
// name: the attributes then come from the record alone, never from the
// device another GPU's name now means.
func (m *deviceMetadata) entryOf(rec checkpoint.PreparedDevice) resourceslices.Entry {
	if named, ok := m.published[rec.Device]; ok && sameHardware(named, rec) {
		return named
	}
	var found resourceslices.Entry
	for name, e := range m.published {
		if sameHardware(e, rec) && (found.GPU == nil || name < found.Device.Name) {
			found = e
		}
	}
	return found
}

// sameHardware reports whether a published entry is a recorded device's
// hardware: of its kind, on its GPU, and at its placement for a MIG
// device.
func sameHardware(e resourceslices.Entry, rec checkpoint.PreparedDevice) bool {
	if e.GPU == nil || !devkind.IsOfKind(rec, e.Kind) || e.GPU.UUID != ledger.Of(rec).GPU {
		return false
	}
	return rec.Mig == nil || (e.Start == rec.Mig.Start && e.Profile.Name == rec.Mig.Profile)
}

// attributes of one prepared device.
func (m *deviceMetadata) attributes(rec checkpoint.PreparedDevice) map[string]resourceapi.DeviceAttribute {
	entry := m.entryOf(rec)
	pub := entry.Device
	attrs := make(map[string]resourceapi.DeviceAttribute, len(pub.Attributes)+16)
	for name, a := range resourceslices.MigDetails(m.inv, entry) {
		attrs[string(name)] = a
	}
	for name, a := range pub.Attributes {
		attrs[string(name)] = a
	}
	setString(attrs, deviceattr.AttrUUID, rec.UUID) // a dynamic MIG device has one only now
	setString(attrs, deviceattr.AttrProductName, rec.ProductName)
	if _, published := attrs[deviceattr.AttrType]; !published {
		// The record's Type is the config type ("gpu" for a monitor
		// device too): it must not override the published one.
		setString(attrs, deviceattr.AttrType, string(rec.Type))
	}
	if rec.Mig != nil {
		setString(attrs, deviceattr.AttrParentUUID, rec.Mig.ParentUUID)
		setString(attrs, deviceattr.AttrProfile, rec.Mig.Profile)
	}
	if v := rec.Vfio; v != nil {
		// What KubeVirt's DRA support reads to find the host device.
		setString(attrs, string(deviceattribute.StandardDeviceAttributePCIBusID), v.PCIBusID)
		setString(attrs, deviceattr.AttrIOMMUGroup, v.IOMMUGroup)
	}
	if mem, ok := pub.Capacity[deviceattr.CapMemory]; ok {
		attrs[MetaAttrMemory] = intAttr(mem.Value.Value())
	}
	if sh := rec.Sharing; sh != nil {
		setString(attrs, MetaAttrSharingStrategy, string(sh.Strategy))
		setString(attrs, MetaAttrTimeSlicingInterval, string(sh.Interval))
		if sh.ActiveThreadPercentage > 0 {
			attrs[MetaAttrMPSActiveThreadPercent] = intAttr(int64(sh.ActiveThreadPercentage))
		}
		if sh.PinnedMemoryBytes > 0 {
			attrs[MetaAttrMPSPinnedMemoryLimit] = intAttr(sh.PinnedMemoryBytes)
			if rec.ShareID != "" {
				// A share's memory limit is the memory it consumed.
				attrs[MetaAttrMemoryShare] = intAttr(sh.PinnedMemoryBytes)
			}
		}
	}
	return attrs
}

func setString(attrs map[string]resourceapi.DeviceAttribute, name, value string) {
	if value != "" {
		attrs[name] = resourceapi.DeviceAttribute{StringValue: ptr.To(value)}
	}
}

func intAttr(v int64) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{IntValue: ptr.To(v)}
}

// The helper removes a claim's metadata when the kubelet unprepares it. A
// claim that the plugin unprepares by itself (deleted while the plugin was
// down) leaves its metadata behind; sweepMetadata removes what belongs to
// no recorded claim. The helper's layout: a CDI spec
// <cdi dir>/<driver>_metadata_<claim UID>_<request>.json whose device
// <claim UID>_<request> mounts <plugin dir>/dra-device-metadata/
// <namespace>_<name>/<request>/metadata.json.

// metadataSubDir is where the helper keeps the files under the plugin dir.
const metadataSubDir = "dra-device-metadata"

// sweepMetadata removes metadata specs and files of claims the checkpoint
// does not hold. It lists the files before it reads the checkpoint: a
// claim being prepared is recorded before its metadata is written, so its
// files are never taken for leftovers.
func (d *Driver) sweepMetadata(ctx context.Context) int {
	logger := klog.FromContext(ctx)
	base := filepath.Join(d.cfg.PluginDir, metadataSubDir)
	dirs, _ := os.ReadDir(base)
	specs, _ := filepath.Glob(filepath.Join(d.cfg.CDIDir, d.cfg.DriverName+"_metadata_*.json"))
	book := d.state.Ledger

	// Every owning record keeps its claim's metadata, a newer driver's
	// included (after a reboot its metadata spec is gone, but its file is
	// what that driver restores from); if a newer record cannot be read,
	// nothing is swept.
	view := book.View()
	if view.Opaque() {
		return 0
	}
	keep := map[string]bool{}
	for _, rec := range view.Records() {
		keep[rec.Namespace+"_"+rec.Name] = true
	}
	removed := 0
	for _, path := range specs {
		uid, claimDirs, ok := readMetadataSpec(path, d.cfg.DriverName, base)
		if !ok {
			continue // not a spec the helper wrote: leave it
		}
		_, foreign := book.Foreign(uid) // NVIDIA's reference driver's (reference.go)
		if _, held := book.Get(uid); held || book.Newer(uid) || foreign {
			for _, dir := range claimDirs {
				keep[dir] = true
			}
			continue
		}
		if err := os.Remove(path); err == nil {
			removed++
		} else if !os.IsNotExist(err) {
			logger.Error(err, "Removing device metadata of an unprepared claim", "spec", path)
		}
	}
	for _, e := range dirs {
		if !e.IsDir() || keep[e.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(base, e.Name())); err == nil {
			removed++
		} else {
			logger.Error(err, "Removing device metadata of an unprepared claim", "dir", e.Name())
		}
	}
	if removed > 0 {
		logger.Info("Removed device metadata of unprepared claims", "files", removed)
	}
	return removed
}

// maxMetadataSpecSize caps what is read of a metadata CDI spec: the
// helper's are a few hundred bytes. The CDI directory is every CDI user's.
const maxMetadataSpecSize = 1 << 20

// readMetadataSpec returns the claim UID of a metadata CDI spec and the
// claim directories (under base) of the files it mounts. Anything but a
// regular file of at most maxMetadataSpecSize is no spec the helper wrote
// (pkg/capfile: a FIFO is never opened for a blocking read).
func readMetadataSpec(path, driverName, base string) (types.UID, []string, bool) {
	data, err := capfile.Read(path, maxMetadataSpecSize)
	if err != nil {
		return "", nil, false
	}
	var spec cdispec.Spec
	if json.Unmarshal(data, &spec) != nil || len(spec.Devices) == 0 {
		return "", nil, false
	}
	// The helper's metadata specs are of CDI kind <driver>/metadata.
	if vendor, class := parser.ParseQualifier(spec.Kind); vendor != driverName || class != "metadata" {
		return "", nil, false
	}
	uid, _, ok := strings.Cut(spec.Devices[0].Name, "_")
	if !ok || uid == "" {
		return "", nil, false
	}
	var dirs []string
	for _, dev := range spec.Devices {
		for _, m := range dev.ContainerEdits.Mounts {
			claimDir := filepath.Dir(filepath.Dir(m.HostPath))
			if filepath.Dir(claimDir) == base {
				dirs = append(dirs, filepath.Base(claimDir))
			}
		}
	}
	return types.UID(uid), dirs, true
}
