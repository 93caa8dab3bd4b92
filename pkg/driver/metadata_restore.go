// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/api/metadata/install"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// After a reboot the CDI directory (a tmpfs) is empty, and a restored
// dynamic MIG device has a new UUID. The kubelet may never prepare the
// claims again, yet restarts their containers with the metadata CDI ID it
// got at prepare: start-up writes each prepared claim's metadata file and
// CDI spec again from its record (restoreMetadata), before the kubelet is
// served. A claim restored later, at a prepare, is written by the helper
// as any prepare is.
//
// The helper writes both only while it answers a prepare; all it exports
// besides is Helper.UpdateRequestMetadata, which rewrites the file only
// (not the spec, the part a reboot loses) and needs the started helper,
// when the kubelet's calls already come in. So this writes what the
// helper writes (kubeletplugin/metadata.go, v0.37.2), with the library's
// own metadata types, scheme and container paths: the file is the
// metadata encoded once per version of metadataVersions, its generation
// one more than the file's before, and the pod claim name kept from it;
// the spec <cdi dir>/<driver>_metadata_<claim UID>_<request>.json has one
// device <claim UID>_<request> that mounts the file read-only.

var metadataCodecs = serializer.NewCodecFactory(install.NewScheme())

// maxMetadataFileSize caps what is read of a claim's metadata file: one
// request's devices and their attributes, a few KiB each.
const maxMetadataFileSize = 4 << 20

// restoreMetadata writes again the metadata of every prepared claim whose
// metadata file the helper wrote at prepare; what is unchanged is left as
// it is. A claim prepared without metadata (the kubelet holds no metadata
// CDI ID for it) gets none. It returns how many files it wrote.
func (d *Driver) restoreMetadata(ctx context.Context) int {
	if d.cfg.NoDeviceMetadata {
		return 0
	}
	logger := klog.FromContext(ctx)
	unrestored := map[string]bool{}
	for _, e := range d.state.Unrestored() {
		unrestored[string(e.UID)] = true // its prepare writes it once restored
	}
	written := 0
	for _, rec := range d.state.Ledger.Claims() {
		if rec.State != checkpoint.PrepareCompleted || unrestored[string(rec.UID)] {
			continue
		}
		devices := make([]kubeletplugin.Device, 0, len(rec.Devices))
		for _, r := range rec.Devices {
			devices = append(devices, kubeletplugin.Device{Requests: r.Requests, PoolName: r.Pool, DeviceName: r.Device})
		}
		d.meta.attach(devices, rec.Devices) // as PrepareResourceClaims does
		byRequest := map[string][]kubeletplugin.Device{}
		for _, dev := range devices {
			for _, req := range dev.Requests {
				byRequest[req] = append(byRequest[req], dev)
			}
		}
		for req, devs := range byRequest {
			changed, err := d.rewriteRequestMetadata(rec, req, devs)
			if err != nil {
				logger.Error(err, "Writing device metadata of a prepared claim", "claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID, "request", req)
			}
			if changed {
				written++
			}
		}
	}
	if written > 0 {
		logger.Info("Wrote device metadata of prepared claims again", "files", written)
	}
	return written
}

// rewriteRequestMetadata writes the metadata file and CDI spec of one
// request (req may name a subrequest) if they differ from what is there.
// It reports whether the file changed.
func (d *Driver) rewriteRequestMetadata(rec checkpoint.PreparedClaim, req string, devs []kubeletplugin.Device) (bool, error) {
	baseReq := resourceclaim.BaseRequestRef(req)
	file := filepath.Join(d.cfg.PluginDir, metadataSubDir, rec.Namespace+"_"+rec.Name, baseReq, "metadata.json")
	// The plugin directory is the plugin's, but what is in it is not
	// trusted to be a file (pkg/capfile: no blocking open, size cap).
	old, err := capfile.Read(file, maxMetadataFileSize)
	if os.IsNotExist(err) {
		return false, nil // prepared without device metadata
	} else if err != nil {
		return false, err
	}
	var prev metadata.DeviceMetadata
	if err := devicemetadata.DecodeMetadataFromStream(json.NewDecoder(bytes.NewReader(old)), &prev); err != nil {
		return false, fmt.Errorf("decode %s: %w", file, err)
	}

	dm := &metadata.DeviceMetadata{
		ObjectMeta:   metav1.ObjectMeta{Name: rec.Name, Namespace: rec.Namespace, UID: rec.UID, Generation: prev.Generation},
		PodClaimName: prev.PodClaimName,
		Requests:     []metadata.DeviceMetadataRequest{{Name: req, Devices: make([]metadata.Device, 0, len(devs))}},
	}
	for _, dev := range devs {
		md := metadata.Device{Driver: d.cfg.DriverName, Pool: dev.PoolName, Name: dev.DeviceName}
		if dev.Metadata != nil && dev.Metadata.Attributes != nil {
			md.Attributes = make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(dev.Metadata.Attributes))
			for k, v := range dev.Metadata.Attributes {
				md.Attributes[resourceapi.QualifiedName(k)] = v
			}
		}
		dm.Requests[0].Devices = append(dm.Requests[0].Devices, md)
	}
	changed := prev.UID != dm.UID || !reflect.DeepEqual(prev.Requests, dm.Requests)
	if changed {
		dm.Generation++
		data, err := encodeMetadata(dm)
		if err != nil {
			return false, err
		}
		if err := writeFileAtomic(file, data); err != nil {
			return false, fmt.Errorf("write %s: %w", file, err)
		}
	}

	container := metadata.ResourceClaimFilePath(d.cfg.DriverName, rec.Name, baseReq)
	if pc := dm.PodClaimName; pc != nil && *pc != "" {
		container = metadata.ResourceClaimTemplateFilePath(d.cfg.DriverName, *pc, baseReq)
	}
	spec := &cdispec.Spec{
		Kind: d.cfg.DriverName + "/metadata",
		Devices: []cdispec.Device{{
			Name: string(rec.UID) + "_" + baseReq,
			ContainerEdits: cdispec.ContainerEdits{Mounts: []*cdispec.Mount{{
				HostPath: file, ContainerPath: container, Options: []string{"ro", "bind"},
			}}},
		}},
	}
	if spec.Version, err = cdispec.MinimumRequiredVersion(spec); err != nil {
		return changed, err
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return changed, err
	}
	path := filepath.Join(d.cfg.CDIDir, fmt.Sprintf("%s_metadata_%s_%s.json", d.cfg.DriverName, rec.UID, baseReq))
	if now, err := capfile.Read(path, maxMetadataSpecSize); err == nil && bytes.Equal(now, data) {
		return changed, nil
	}
	if err := os.MkdirAll(d.cfg.CDIDir, 0o755); err != nil {
		return changed, err
	}
	if err := writeFileAtomic(path, data); err != nil {
		return changed, fmt.Errorf("write %s: %w", path, err)
	}
	return changed, nil
}

// encodeMetadata encodes dm once per version of metadataVersions, newest
// first, as a JSON stream.
func encodeMetadata(dm *metadata.DeviceMetadata) ([]byte, error) {
	info, ok := runtime.SerializerInfoForMediaType(metadataCodecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, fmt.Errorf("no JSON serializer for device metadata")
	}
	var buf bytes.Buffer
	for _, gv := range metadataVersions {
		data, err := runtime.Encode(metadataCodecs.EncoderForVersion(info.PrettySerializer, gv), dm)
		if err != nil {
			return nil, fmt.Errorf("encode metadata as %s: %w", gv, err)
		}
		buf.Write(data)
		buf.WriteByte('\n')
	}
	return buf.Bytes(), nil
}

// writeFileAtomic replaces path by data (mode 0644, as the helper writes
// it): a container never reads a half-written file.
func writeFileAtomic(path string, data []byte) error {
	return capfile.WriteAtomic(path, data, 0o644, true)
}
