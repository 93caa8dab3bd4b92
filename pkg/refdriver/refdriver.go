// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package refdriver reads what NVIDIA's reference DRA driver
// (github.com/NVIDIA/k8s-dra-driver-gpu, module sigs.k8s.io/dra-driver-nvidia-gpu)
// leaves on a node: its checkpoint and its CDI specs. Both drivers are
// called gpu.nvidia.com and share the kubelet plugin directory and the CDI
// directory, so a node switched from it to this driver may still run pods
// whose devices it prepared. This package only reads (and, once none of
// its claims is left, renames its checkpoint); it never changes a device.
//
// Facts below are from the reference driver's source at
// kubernetes-sigs/dra-driver-nvidia-gpu commit
// 95932046683719c43b6a0dd9613c2e5aad5d6703 (main, 2026), the commit the
// fixtures in testdata were written from; no code is taken from it.
package refdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// CheckpointFile is the reference driver's checkpoint, in its plugin
// directory <kubelet dir>/plugins/gpu.nvidia.com (the directory this
// plugin's chart mounts as its own): cmd/gpu-kubelet-plugin/main.go,
// DriverPluginCheckpointFileBasename and Config.DriverPluginPath. This
// plugin's records live in the checkpoint/ subdirectory, one file per
// claim (pkg/checkpoint), so the names never collide.
const CheckpointFile = "checkpoint.json"

// MigratedSuffix is appended to CheckpointFile once none of its claims is
// left (Rename): a later start does not look at it again, and a rollback
// to the reference driver starts it with an empty checkpoint, which is
// right then.
const MigratedSuffix = ".migrated"

// maxCheckpointSize caps what is read: a checkpoint of hundreds of claims
// is a few MiB.
const maxCheckpointSize = 64 << 20

// checkpointFormat is the file's JSON shape, only the parts read here:
// cmd/gpu-kubelet-plugin/checkpoint.go (type Checkpoint: "checksum",
// "v1", "v2") and checkpointv.go (CheckpointV1, CheckpointV2,
// PreparedClaimV1, PreparedClaimV2). MarshalCheckpoint writes both v1 and
// v2 (v1 only with the claims in PrepareCompleted); releases before v2
// wrote v1 alone.
type checkpointFormat struct {
	V1 *struct {
		PreparedClaims map[string]preparedClaim `json:"preparedClaims"`
	} `json:"v1"`
	V2 *struct {
		PreparedClaims map[string]preparedClaim `json:"preparedClaims"`
		NodeBootID     string                   `json:"nodeBootID"`
	} `json:"v2"`
}

// preparedClaim is PreparedClaimV2 (V1 lacks checkpointState, name and
// namespace). Name and namespace are set only while the claim is
// PrepareStarted: device_state.go, Prepare, writes them with that state
// and then replaces the entry with one in PrepareCompleted that has
// neither, so a prepared claim is known by UID alone.
type preparedClaim struct {
	CheckpointState string                          `json:"checkpointState"`
	Status          resourceapi.ResourceClaimStatus `json:"status"`
	Name            string                          `json:"name"`
	Namespace       string                          `json:"namespace"`
	PreparedDevices []preparedGroup                 `json:"preparedDevices"`
}

// preparedGroup is PreparedDeviceGroup (prepared.go): devices, each
// {"gpu": {info, device}}, {"mig": {concrete, device}} or {"vfio": {info,
// device}}, and the group's DeviceConfigState (device_state.go), whose
// mpsControlDaemonID names the MPS daemon started for it.
type preparedGroup struct {
	Devices []struct {
		Gpu *struct {
			Info   struct{ UUID string } `json:"info"`
			Device *kubeletDevice        `json:"device"`
		} `json:"gpu"`
		Mig *struct {
			Concrete *MigDevice     `json:"concrete"`
			Device   *kubeletDevice `json:"device"`
		} `json:"mig"`
		Vfio *struct {
			Info   vfioInfo       `json:"info"`
			Device *kubeletDevice `json:"device"`
		} `json:"vfio"`
	} `json:"devices"`
	// ConfigState: timeSliceApplied is set (true) only where a time
	// slice was applied at prepare (applySharingConfig), since NVIDIA's
	// 9734b95f; its unprepare resets those GPUs to the default slice.
	ConfigState struct {
		MpsControlDaemonID string `json:"mpsControlDaemonID"`
		TimeSliceApplied   *bool  `json:"timeSliceApplied"`
	} `json:"configState"`
}

// vfioInfo is VfioDeviceInfo (deviceinfo.go) as serialized: its UUID is
// not the GPU's (NVML does not see a GPU on vfio-pci) but one derived
// from the PCI address (VfioUUID), and pciBusID is written only by
// releases after 25.12.0 (omitempty).
type vfioInfo struct {
	UUID     string `json:"uuid"`
	PciBusID string `json:"pciBusID"`
}

// kubeletDevice is CheckpointedDevice (checkpointv.go), the layout of
// kubeletplugin.Device with its Go field names as keys; ShareID is
// written only where set (omitempty since 1.36's field).
type kubeletDevice struct {
	Requests     []string `json:"Requests"`
	PoolName     string   `json:"PoolName"`
	DeviceName   string   `json:"DeviceName"`
	CDIDeviceIDs []string `json:"CDIDeviceIDs"`
	ShareID      string   `json:"ShareID"`
}

// MigDevice is a MIG device a claim of the reference driver holds, as its
// checkpoint names it (MigLiveTuple in cmd/gpu-kubelet-plugin/mig.go).
type MigDevice struct {
	ParentUUID string `json:"parentUUID"`
	GIID       int    `json:"giId"`
	CIID       int    `json:"ciId"`
	UUID       string `json:"migUUID"`
}

// Device is one device a claim of the reference driver was prepared
// with: what the kubelet was told (Requests, Pool, Name, CDIDeviceIDs)
// and the hardware it is.
type Device struct {
	Requests     []string
	Pool, Name   string
	CDIDeviceIDs []string
	// GPU is the UUID of the GPU the device is or is on.
	GPU string
	// Mig is set for a MIG device; Vfio for a GPU handed to a VM, with
	// the GPU's PCI address where the checkpoint has it (GPU is then the
	// UUID VfioUUID derives from that address, not the GPU's).
	Mig      *MigDevice
	Vfio     bool
	PCIBusID string
	// ShareID is the claim's share of a device several claims use at once
	// (NVIDIA's ConsumableShares): the allocation result's shareID.
	ShareID string
}

// Group is one PreparedDeviceGroup: the devices one opaque config was
// applied to, and what that config changed on the node, which NVIDIA's
// unprepare undoes per group (device_state.go, unprepareDevices).
type Group struct {
	// GPUs are the UUIDs of the group's whole GPUs (GpuUUIDs in
	// prepared.go: no MIG or VFIO device), the ones NVIDIA set a compute
	// mode or a time slice on.
	GPUs []string
	// MPSDaemon is the ID of the MPS control daemon started for the
	// group, "" for none.
	MPSDaemon string
	// TimeSliceApplied: a time slice was set on GPUs at prepare.
	TimeSliceApplied bool
}

// Claim is one claim the reference driver's checkpoint lists: prepared,
// or with a prepare begun (state PrepareStarted, which may already have
// created a MIG device).
type Claim struct {
	UID string
	// Namespace and Name are empty in the v1 format and for claims in
	// PrepareCompleted (see preparedClaim).
	Namespace, Name string
	// State is the checkpoint state: PrepareStarted or PrepareCompleted
	// ("PrepareCompleted" for the v1 format, as its ToV2 does).
	State string
	// Allocation is the claim's allocation when it was prepared (the
	// checkpoint keeps the claim's status); nil if it kept none.
	Allocation *resourceapi.AllocationResult
	// Devices are the devices it was prepared with (none while
	// PrepareStarted: the reference driver records them at completion).
	Devices []Device
	// Mig lists the MIG devices it holds.
	Mig []MigDevice
	// MPSDaemons are the IDs of the MPS control daemons started for it
	// (sharing.go, GetMpsControlDaemonID: "<claim UID>-<hash>").
	MPSDaemons []string
	// Groups are its device groups, in the checkpoint's order.
	Groups []Group
}

// Completed reports whether the reference driver told the kubelet the
// claim is prepared.
func (c Claim) Completed() bool { return c.State == StateCompleted }

// String names the claim for a person: namespace/name where the
// checkpoint has them, the UID otherwise.
func (c Claim) String() string {
	if c.Name == "" {
		return "uid " + c.UID
	}
	return c.Namespace + "/" + c.Name
}

// StateCompleted is ClaimCheckpointStatePrepareCompleted (checkpointv.go).
const StateCompleted = "PrepareCompleted"

// Checkpoint is what the reference driver's checkpoint file says.
type Checkpoint struct {
	Path string
	// Claims are the listed claims, by UID.
	Claims []Claim
	// NodeBootID is the boot the reference driver last validated the
	// checkpoint in; empty in the v1 format.
	NodeBootID string
}

// ReadCheckpoint reads <pluginDir>/checkpoint.json. A missing file is
// (nil, nil). A file that is not the reference driver's format is an
// error: the caller cannot tell what it holds.
func ReadCheckpoint(pluginDir string) (*Checkpoint, error) {
	path := filepath.Join(pluginDir, CheckpointFile)
	data, err := capfile.Read(path, maxCheckpointSize)
	if errors.Is(err, os.ErrNotExist) {
		// A symbolic link whose target is gone is a file that cannot be
		// read, not a node without the reference driver: what it pointed
		// at may list claims in use.
		if _, lerr := os.Lstat(path); lerr == nil {
			target, _ := os.Readlink(path)
			return nil, fmt.Errorf("%s is a symbolic link to %q, which does not exist", path, target)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f checkpointFormat
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s is not NVIDIA's reference driver's checkpoint format: %w", path, err)
	}
	cp := &Checkpoint{Path: path}
	var claims map[string]preparedClaim
	switch {
	case f.V2 != nil:
		claims, cp.NodeBootID = f.V2.PreparedClaims, f.V2.NodeBootID
	case f.V1 != nil:
		claims = f.V1.PreparedClaims
	default:
		return nil, fmt.Errorf("%s has neither \"v1\" nor \"v2\": not NVIDIA's reference driver's checkpoint format", path)
	}
	for uid, pc := range claims {
		cp.Claims = append(cp.Claims, pc.claim(uid))
	}
	sort.Slice(cp.Claims, func(i, j int) bool { return cp.Claims[i].UID < cp.Claims[j].UID })
	return cp, nil
}

func (pc preparedClaim) claim(uid string) Claim {
	c := Claim{UID: uid, Namespace: pc.Namespace, Name: pc.Name, State: pc.CheckpointState, Allocation: pc.Status.Allocation}
	if c.State == "" {
		c.State = StateCompleted // v1 knows prepared claims only
	}
	for _, g := range pc.PreparedDevices {
		group := Group{MPSDaemon: g.ConfigState.MpsControlDaemonID, TimeSliceApplied: g.ConfigState.TimeSliceApplied != nil && *g.ConfigState.TimeSliceApplied}
		if group.MPSDaemon != "" {
			c.MPSDaemons = append(c.MPSDaemons, group.MPSDaemon)
		}
		for _, d := range g.Devices {
			var dev Device
			var kd *kubeletDevice
			switch {
			case d.Gpu != nil:
				dev.GPU, kd = d.Gpu.Info.UUID, d.Gpu.Device
				group.GPUs = append(group.GPUs, dev.GPU)
			case d.Mig != nil && d.Mig.Concrete != nil:
				m := *d.Mig.Concrete
				dev.GPU, dev.Mig, kd = m.ParentUUID, &m, d.Mig.Device
				c.Mig = append(c.Mig, m)
			case d.Vfio != nil:
				dev.GPU, dev.Vfio, dev.PCIBusID, kd = d.Vfio.Info.UUID, true, d.Vfio.Info.PciBusID, d.Vfio.Device
			default:
				continue
			}
			if kd != nil {
				dev.Requests, dev.Pool, dev.Name, dev.CDIDeviceIDs, dev.ShareID = kd.Requests, kd.PoolName, kd.DeviceName, kd.CDIDeviceIDs, kd.ShareID
			}
			if dev.ShareID == "" {
				dev.ShareID = shareID(c.Allocation, dev)
			}
			c.Devices = append(c.Devices, dev)
		}
		slices.Sort(group.GPUs)
		c.Groups = append(c.Groups, group)
	}
	return c
}

// shareID is the share of the device the claim's allocation names, ""
// when the device is not shared: the scheduler sets a result's shareID
// only for a device that allows multiple allocations, which NVIDIA's
// plugin publishes with ConsumableShares on.
func shareID(a *resourceapi.AllocationResult, dev Device) string {
	if a == nil {
		return ""
	}
	for _, r := range a.Devices.Results {
		if r.Device == dev.Name && r.Pool == dev.Pool && slices.Contains(dev.Requests, r.Request) && r.ShareID != nil {
			return string(*r.ShareID)
		}
	}
	return ""
}

// Rename moves the checkpoint to <name>.migrated, replacing an older one.
func (cp *Checkpoint) Rename() error {
	return os.Rename(cp.Path, cp.Path+MigratedSuffix)
}

// specPrefix and specSuffix make the name of the reference driver's CDI
// spec of a claim: cdi.go, CreateClaimSpecFile and writeSpec, through
// cdiapi.GenerateTransientSpecName(cdiVendor, cdiClaimClass, claimUID) +
// ".yaml" with cdiVendor "k8s.gpu.nvidia.com" and cdiClaimClass "claim":
// k8s.gpu.nvidia.com-claim_<claim UID>.yaml, of CDI kind
// k8s.gpu.nvidia.com/claim, the same kind as this driver's. This driver
// writes .json specs (pkg/cdi), which is how the two are told apart.
const specSuffix = ".yaml"

// SpecFiles lists the reference driver's claim CDI specs in cdiDir for a
// driver name, sorted; a missing directory has none.
func SpecFiles(cdiDir, driverName string) ([]string, error) {
	prefix := "k8s." + driverName + "-claim_"
	return capfile.List(cdiDir, func(name string) bool {
		return strings.HasPrefix(name, prefix) && strings.HasSuffix(name, specSuffix)
	})
}
