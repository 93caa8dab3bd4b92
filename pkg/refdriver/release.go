// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package refdriver

import (
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// This plugin takes over the claims the reference driver left prepared
// (pkg/driver/reference.go) and answers the kubelet's unprepare of them by
// releasing what the reference driver made for them. Its checkpoint stays
// as it wrote it until none of its claims is held (a rollback to it then
// finds what it knows); the claims released meanwhile are listed beside
// it, in ReleasedFile, so that a restart does not hold them again.

// ReleasedFile lists, beside CheckpointFile, the UIDs of its claims this
// plugin has released.
const ReleasedFile = CheckpointFile + ".released"

// SpecFile is the path of the reference driver's CDI spec of a claim
// (see specSuffix).
func SpecFile(cdiDir, driverName, claimUID string) string {
	return filepath.Join(cdiDir, "k8s."+driverName+"-claim_"+claimUID+specSuffix)
}

// MPSDeployment is the name of the Deployment that runs the reference
// driver's MPS control daemon of the given ID (sharing.go,
// MpsControlDaemonNameFmt "mps-control-daemon-%v"); it is created in the
// reference driver's own namespace, with the label app=<name>
// (templates/mps-control-daemon.tmpl.yaml).
func MPSDeployment(id string) string { return "mps-control-daemon-" + id }

// MPSDir is the directory of the reference driver's MPS control daemon
// of the given ID in its plugin directory: <plugin dir>/mps/<id>, with
// pipe/, log/ and shm/, a tmpfs it mounts (sharing.go, NewMpsManager,
// NewMpsControlDaemon, Start).
func MPSDir(pluginDir, id string) string { return filepath.Join(pluginDir, "mps", id) }

// MPSDaemonLabel is the label NVIDIA's template puts on the Deployment of
// an MPS control daemon, with the Deployment's name as its value
// (templates/mps-control-daemon.tmpl.yaml: metadata.labels,
// spec.selector and the pod template all carry app: <name>); its pod
// template pins the node (spec.template.spec.nodeName). The chart's
// admission policy for the take-over (templates/takeover.yaml) admits a
// delete of a Deployment only with both.
const MPSDaemonLabel = "app"

// MPSDaemonPrefix starts the name of every such Deployment (MPSDeployment).
const MPSDaemonPrefix = "mps-control-daemon-"

// vfioNamespace is uuid.NameSpaceDNS (RFC 4122, appendix C), the
// namespace of the name-based UUIDs NVIDIA gives GPUs on vfio-pci.
var vfioNamespace = [16]byte{0x6b, 0xa7, 0xb8, 0x10, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}

// VfioUUID is the UUID NVIDIA's plugin gives the VFIO device of the GPU at
// a PCI address (nvlib.go, getVfioDeviceInfo:
// uuid.NewSHA1(uuid.NameSpaceDNS, []byte(address)), a version 5 UUID),
// which its checkpoint records; releases up to 25.12.0 record no PCI
// address beside it, so the address is found by deriving this from each.
func VfioUUID(addr string) string {
	h := sha1.New()
	h.Write(vfioNamespace[:])
	h.Write([]byte(addr))
	u := h.Sum(nil)[:16]
	u[6] = u[6]&0x0f | 0x50 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}

// Released reads ReleasedFile; a missing file lists none.
func Released(pluginDir string) (map[string]bool, error) {
	path := filepath.Join(pluginDir, ReleasedFile)
	data, err := capfile.Read(path, maxCheckpointSize)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	var uids []string
	if err := json.Unmarshal(data, &uids); err != nil {
		return nil, fmt.Errorf("%s is not a JSON list of claim UIDs: %w; remove it to hold every claim of %s again", path, err, CheckpointFile)
	}
	out := make(map[string]bool, len(uids))
	for _, u := range uids {
		out[u] = true
	}
	return out, nil
}

// WriteReleased replaces ReleasedFile with the given UIDs, atomically.
func WriteReleased(pluginDir string, released map[string]bool) error {
	uids := make([]string, 0, len(released))
	for u := range released {
		uids = append(uids, u)
	}
	slices.Sort(uids)
	data, err := json.Marshal(uids)
	if err != nil {
		return err
	}
	path := filepath.Join(pluginDir, ReleasedFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Finish renames the checkpoint (Rename) and removes ReleasedFile: none
// of its claims is held any more.
func (cp *Checkpoint) Finish() error {
	if err := cp.Rename(); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(filepath.Dir(cp.Path), ReleasedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
