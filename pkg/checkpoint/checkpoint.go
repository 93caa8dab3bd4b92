// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package checkpoint records which claims this node has prepared, so that a
// restarted plugin can answer the kubelet and undo work after a crash.
//
// Each claim has its own file, written atomically (temp file, fsync,
// rename). One file per claim keeps unrelated claims from contending on a
// node-wide lock around disk I/O, and a damaged file costs one claim's
// record, which Open moves aside so the caller can rebuild it.
//
// Versioning: every file names its format ("gpu.nvidia.com/checkpoint/v<N>"),
// and N goes up whenever what a record holds or how it is checked changes
// in a way a reader of the older format would misread. A reader reads every
// older format; the current one is decoded strictly, so a field it does not
// know is damage, not something to drop. A record is written in the oldest
// format that holds it, so a rollback by one release reads it (version.go).
// A record of a newer format (after a downgrade) is left untouched on disk
// and its claim is refused (NewerError) rather than prepared, rewritten or
// deleted, so a downgrade loses nothing and upgrading back restores the
// claim.
package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

const fileSuffix = ".json"

// ClaimState is how far preparation of a claim got.
type ClaimState string

const (
	// PrepareStarted is written before any device is touched; finding it on
	// start means the plugin died half-way and must roll back.
	PrepareStarted ClaimState = "PrepareStarted"
	// PrepareCompleted means the CDI spec is written and the IDs returned.
	PrepareCompleted ClaimState = "PrepareCompleted"
	// RestorePending is a prepared claim whose devices lost their
	// configuration (a reboot) and are not configured again yet: its
	// MIG identities are forgotten, and it is restored, never rolled back.
	RestorePending ClaimState = "RestorePending"
)

// Prepared reports whether the kubelet was told the claim is prepared.
func (c PreparedClaim) Prepared() bool {
	return c.State == PrepareCompleted || c.State == RestorePending
}

// PreparedDevice is one allocated device of a prepared claim.
type PreparedDevice struct {
	Requests []string `json:"requests,omitempty"`
	Pool     string   `json:"pool"`
	Device   string   `json:"device"`
	// Type is the device kind's ConfigType: "gpu" (whole GPUs and monitor
	// devices) or "mig" (every MIG device).
	Type         configapi.DeviceKind `json:"type"`
	UUID         string               `json:"uuid,omitempty"`
	ProductName  string               `json:"productName,omitempty"`
	CDIDeviceIDs []string             `json:"cdiDeviceIDs,omitempty"`
	// Shared marks devices that other claims may use at the same time
	// (admin access), so they are not counted as exclusively held.
	Shared bool `json:"shared,omitempty"`
	// ShareID is set for one share of a device that allows several
	// allocations (a memory fraction); device status must name it.
	ShareID string `json:"shareID,omitempty"`
	// AdminAccess devices are monitored, not used: they never conflict.
	AdminAccess bool `json:"adminAccess,omitempty"`
	// Mig is set for MIG devices.
	Mig *MigRecord `json:"mig,omitempty"`
	// Sharing is set when time-slicing or MPS was applied.
	Sharing *SharingRecord `json:"sharing,omitempty"`
	// Vfio is set for a passthrough device (format v3).
	Vfio *VfioRecord `json:"vfio,omitempty"`
}

// VfioRecord is a GPU handed to vfio-pci. Driver is the binding the claim
// wants: "vfio-pci" from the record written before the first sysfs write
// of prepare, "nvidia" from the record written before unprepare's first
// write (then in state PrepareStarted, so that a start finishes the job).
// Start-up binds the GPU to it whatever step a crash interrupted
// (pkg/prepare/passthrough.go).
type VfioRecord struct {
	PCIBusID   string `json:"pciBusID"`
	IOMMUGroup string `json:"iommuGroup,omitempty"`
	Driver     string `json:"driver"`
	// GPU is the GPU as NVML described it before it left NVML: while it is
	// bound to vfio-pci NVML does not see it, and a restarted plugin
	// publishes it (and its other devices, for when it comes back) from
	// here.
	GPU *nvdev.GPU `json:"gpu,omitempty"`
}

// SharingRecord is what sharing prepare applied to a device. Strategy and
// Interval are the config API's types, stored as their strings.
type SharingRecord struct {
	Strategy configapi.SharingStrategy `json:"strategy"`
	// Target is the UUID the setting applies to: the GPU for time-slicing,
	// the GPU or MIG device for MPS.
	Target                 string                      `json:"target"`
	Interval               configapi.TimeSliceInterval `json:"interval,omitempty"`
	ActiveThreadPercentage int                         `json:"activeThreadPercentage,omitempty"`
	PinnedMemoryBytes      int64                       `json:"pinnedMemoryBytes,omitempty"`
}

// MigRecord locates a MIG device on its parent GPU.
type MigRecord struct {
	ParentUUID string `json:"parentUUID"`
	Profile    string `json:"profile"`
	Start      uint32 `json:"start"`
	Size       uint32 `json:"size"`
	// Dynamic MIG devices were created by this driver at prepare and are
	// destroyed at unprepare; GIID and CIID are -1 until created.
	Dynamic bool `json:"dynamic,omitempty"`
	GIID    int  `json:"giID"`
	CIID    int  `json:"ciID"`
}

// PreparedClaim is the record of one claim.
type PreparedClaim struct {
	UID       types.UID        `json:"uid"`
	Namespace string           `json:"namespace"`
	Name      string           `json:"name"`
	State     ClaimState       `json:"state"`
	Devices   []PreparedDevice `json:"devices,omitempty"`
	// BootID is the node's boot ID (/proc/sys/kernel/random/boot_id) of
	// the boot in which the claim was prepared; empty in records written
	// before 9ac2442, or rewritten by a release before it.
	BootID string `json:"bootID,omitempty"`
}

// file is the on-disk form; the checksum covers the claim's bytes exactly
// as written.
type file struct {
	Version  string          `json:"version"`
	Checksum uint32          `json:"checksum"`
	Claim    json.RawMessage `json:"claim"`
}

// Store is the set of claim records in one directory.
type Store struct {
	dir string

	mu     sync.RWMutex // guards claims only; never held across I/O
	claims map[types.UID]PreparedClaim
	// newer maps claims recorded in a newer format to that format's
	// version, and newerClaims holds what could be read of them
	// (newer.go). Open fills both; they never change afterwards.
	newer       map[types.UID]string
	newerClaims map[types.UID]NewerClaim
	// stray are claims whose file Open could neither load nor move
	// aside: on disk, though not in claims. Delete removes those files
	// too; any other claim absent from claims has no file to remove.
	stray map[types.UID]bool
}

// Recovered describes records Open could not use.
type Recovered struct {
	// MovedAside lists damaged files renamed to *.corrupt-<time>.
	MovedAside []string
	// Newer maps each claim recorded by a newer driver to the version of
	// its file. Those files are left as they are and not loaded.
	Newer map[types.UID]string
}

// Open loads every record in dir, creating dir if needed. Unreadable,
// corrupt or unknown-version files are moved aside and reported instead of
// failing: the plugin must never crash-loop on its own files. Records of a
// newer format are left in place and reported in Recovered.Newer.
func Open(dir string) (*Store, Recovered, error) {
	var rec Recovered
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, rec, fmt.Errorf("create checkpoint dir: %w", err)
	}
	s := &Store{dir: dir, claims: map[types.UID]PreparedClaim{}, newer: map[types.UID]string{}, newerClaims: map[types.UID]NewerClaim{}, stray: map[types.UID]bool{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, rec, fmt.Errorf("read checkpoint dir: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		if strings.HasPrefix(name, capfile.TempPrefix) {
			// A write that never reached its rename.
			_ = os.Remove(path)
			continue
		}
		if e.IsDir() || !strings.HasSuffix(name, fileSuffix) {
			continue
		}
		claim, err := readFile(path)
		var newer *NewerVersionError
		if uid := types.UID(strings.TrimSuffix(name, fileSuffix)); errors.As(err, &newer) && ValidToken(string(uid)) {
			s.newer[uid] = newer.Version
			s.newerClaims[uid] = readNewer(path, uid, newer.Version)
			if rec.Newer == nil {
				rec.Newer = map[types.UID]string{}
			}
			rec.Newer[uid] = newer.Version
			continue
		}
		if err != nil || string(claim.UID)+fileSuffix != name {
			aside := fmt.Sprintf("%s.corrupt-%d", path, time.Now().UnixNano())
			if rerr := os.Rename(path, aside); rerr != nil {
				// Ignoring it is still better than not starting: the
				// record is not loaded either way.
				aside = fmt.Sprintf("%s (could not move it aside: %v)", path, rerr)
				s.stray[types.UID(strings.TrimSuffix(name, fileSuffix))] = true
			}
			rec.MovedAside = append(rec.MovedAside, aside)
			continue
		}
		s.claims[claim.UID] = claim
	}
	return s, rec, nil
}

// ReadOnly returns the valid records in dir without changing anything
// there: damaged files are skipped rather than moved aside, records of a
// newer format are returned as far as they can be read (newer.go), and a
// missing dir holds no records. For previews (--print-slices) of a live
// node.
func ReadOnly(dir string) ([]PreparedClaim, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint dir: %w", err)
	}
	var out []PreparedClaim
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, fileSuffix) {
			continue
		}
		path := filepath.Join(dir, name)
		claim, err := readFile(path)
		var newer *NewerVersionError
		if uid := types.UID(strings.TrimSuffix(name, fileSuffix)); errors.As(err, &newer) && ValidToken(string(uid)) {
			// A newer driver's claim holds its devices all the same.
			if n := readNewer(path, uid, newer.Version); n.Readable {
				out = append(out, n.Claim)
			}
			continue
		}
		if err == nil && string(claim.UID)+fileSuffix == name {
			out = append(out, claim)
		}
	}
	return out, nil
}

// readFile reads one record of any format this driver knows. A record of
// a newer format is a *NewerVersionError (without its UID, which only the
// file name gives).
func readFile(path string) (PreparedClaim, error) {
	data, err := capfile.Read(path, MaxFileSize)
	if err != nil {
		return PreparedClaim{}, err
	}
	c, err := decodeFile(data)
	if err != nil {
		var newer *NewerVersionError
		if errors.As(err, &newer) {
			return PreparedClaim{}, err
		}
		return PreparedClaim{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Get returns the record of a claim.
func (s *Store) Get(uid types.UID) (PreparedClaim, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, ok := s.claims[uid]
	return c.DeepCopy(), ok
}

// List returns all records.
func (s *Store) List() []PreparedClaim {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]PreparedClaim, 0, len(s.claims))
	for _, c := range s.claims {
		out = append(out, c.DeepCopy())
	}
	return out
}

// Put atomically writes a claim's record.
//
// PrepareCompleted records are fsynced before the rename: the kubelet is
// told the claim is prepared only once its record would survive a power
// loss. PrepareStarted records are not: they only guard device changes
// (MIG instances, sharing settings, a VM's binding) against a crash of the
// plugin, for which the page cache suffices, and those changes do not
// survive a power loss either. RestorePending records are written at
// start, before the kubelet is served, and rewritten by every start until
// restored. The directory is not fsynced: a record lost to power failure
// only makes the kubelet prepare the claim again (it prepares every claim
// again after its own restart), which is idempotent, and start-up removes
// anything unrecorded. (docs/architecture.md, "Which write protects what".)
//
// A claim recorded by a newer driver is refused and its file left as it is.
func (s *Store) Put(c PreparedClaim) error {
	if err := s.NewerError(c.UID); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("refusing to record claim %s: %w", c.UID, err)
	}
	c = c.DeepCopy() // the caller keeps changing its copy
	payload, err := json.Marshal(c)
	if err != nil {
		return err
	}
	data, err := json.Marshal(file{Version: versionPrefix + strconv.Itoa(writeFormat(c)), Checksum: crc32.ChecksumIEEE(payload), Claim: payload})
	if err != nil {
		return err
	}
	if err := writeAtomic(s.path(c.UID), data, c.State == PrepareCompleted); err != nil {
		return fmt.Errorf("write checkpoint of claim %s: %w", c.UID, err)
	}
	s.mu.Lock()
	s.claims[c.UID] = c
	s.mu.Unlock()
	return nil
}

// Delete removes a claim's record; deleting a missing record is not an
// error. A record of a newer format is not deleted: that is an error.
//
// A claim the store holds no file of (a prepare that needed no record
// before its completion and failed, pkg/ledger Begin) is not unlinked:
// every file of the directory is in claims, newer or stray from Open on,
// and only Put adds one.
func (s *Store) Delete(uid types.UID) error {
	if err := s.NewerError(uid); err != nil {
		return err
	}
	s.mu.RLock()
	_, onDisk := s.claims[uid]
	onDisk = onDisk || s.stray[uid]
	s.mu.RUnlock()
	if !onDisk {
		return nil
	}
	if err := capfile.Remove(s.path(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete checkpoint of claim %s: %w", uid, err)
	}
	s.mu.Lock()
	delete(s.claims, uid)
	delete(s.stray, uid)
	s.mu.Unlock()
	return nil
}

// path is only ever built from a UID that Validate accepted or that came
// from the kubelet, and a record read back is checked against its name.
func (s *Store) path(uid types.UID) string {
	return filepath.Join(s.dir, string(uid)+fileSuffix)
}

// writeAtomic writes a record or the fence's owner file (mode 0600).
func writeAtomic(path string, data []byte, durable bool) error {
	return capfile.WriteAtomic(path, data, 0o600, durable)
}
