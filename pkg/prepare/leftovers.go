// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

// What an unprepare leaves on a lost GPU (issue 55, defect 3). A GPU that
// falls off the bus answers every NVML call on it with GPU_IS_LOST ("The
// GPU has fallen off the bus or has otherwise become inaccessible", NVML
// API reference, nvmlReturn_t); nothing on it can be released until it is
// back (a GPU reset, or a reboot, which takes its MIG devices and time
// slice with it). nvmlGpuInstanceDestroy does not list GPU_IS_LOST among
// its return codes, and a lost GPU may answer it with UNKNOWN as well, so
// the GPU is asked with a query whose reference does list it
// (nvmlDeviceGetMemoryInfo, as pkg/health does) rather than trusting the
// code of the call that failed.
//
// Unprepare must not fail for it: the kubelet retries on every sync, the
// claim's other devices and record would stay, and the pod's next claim
// on the healthy GPUs would wait behind them. So it releases everything
// else and writes what stays on the lost GPU into a leftover record of
// its own (the claim's UID plus ".lost"), in state PrepareStarted: the
// state whose records start rolls back before the kubelet is served, and
// which no walk over prepared claims (device status, stale claims, MPS
// supervision, metrics) takes for a prepared claim. The ledger holds what
// a leftover names, like any record, so nothing is prepared on that MIG
// placement or taken for unowned while it is there. The claim's own
// record goes last, as every release's does.
//
// A leftover is released by start (RecoverLocal's rollback) and, while
// the plugin runs, by ReleaseLeftovers, which the node's periodic pass
// calls (SuperviseSharing) once every GPU of the leftover answers again.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"
)

// leftoverSuffix marks a leftover's record name. Claim UIDs are the API's
// (UUIDs), which never hold a dot, so no claim's record has this name.
const leftoverSuffix = ".lost"

// leftoverUID is the n-th leftover record name of a claim (n from 1).
func leftoverUID(claim types.UID, n int) types.UID {
	if n <= 1 {
		return claim + leftoverSuffix
	}
	return types.UID(string(claim) + leftoverSuffix + "-" + strconv.Itoa(n))
}

// leftoverOf reports whether uid names a leftover record, and of which
// claim.
func leftoverOf(uid types.UID) (types.UID, bool) {
	claim, n, found := strings.Cut(string(uid), leftoverSuffix)
	if !found || claim == "" {
		return "", false
	}
	if n == "" {
		return types.UID(claim), true
	}
	i, err := strconv.Atoi(strings.TrimPrefix(n, "-"))
	if err != nil || !strings.HasPrefix(n, "-") || i < 2 || strconv.Itoa(i) != n[1:] {
		return "", false
	}
	return types.UID(claim), true
}

// LostGPUError says that what a release needs is on a lost GPU, which is
// released when the GPU answers again.
type LostGPUError struct {
	Record  types.UID
	Devices []string
	GPUs    []string
}

func (e *LostGPUError) Error() string {
	return fmt.Sprintf("devices %v stay on lost GPUs %v (NVML: GPU_IS_LOST), recorded as %s: released when the GPU answers again (after a GPU reset, or at the next start)", e.Devices, e.GPUs, e.Record)
}

// releaseDevice undoes one device's prepare: its sharing, then the
// device by the kind its record names. On failure it returns what is left
// of the device (its record without the sharing, when that went).
func (s *State) releaseDevice(env devkind.Env, uid types.UID, d checkpoint.PreparedDevice, at phase) (checkpoint.PreparedDevice, error) {
	left := d
	if at == atStart && d.Sharing != nil && d.Sharing.Strategy == configapi.MpsStrategy {
		left.Sharing = nil // stopped as unowned, in the background
	} else {
		if err := s.releaseSharing(uid, d.Sharing); err != nil {
			return left, err
		}
		left.Sharing = nil
	}
	// Released on the record's own hardware (liveDevice: by UUID and
	// placement, published under its name, under another one after a
	// renumbering, or not at all after a chart value or feature gate was
	// turned off); a device whose GPU is not on the node is released as
	// far as its kind can without it.
	return left, devkind.OfRecord(d).Release(env, d, s.liveDeviceOrNil(d))
}

// gpuLost reports whether the GPU of a recorded device answers NVML with
// GPU_IS_LOST. A VM's GPU is out of NVML's reach on purpose (vfio-pci),
// and its release is the binding's, which start finishes (passthrough.go).
func (s *State) gpuLost(d checkpoint.PreparedDevice) bool {
	if d.Vfio != nil {
		return false
	}
	dev := s.liveDeviceOrNil(d)
	if dev == nil || dev.GPU.Device == nil {
		return false
	}
	_, ret := dev.GPU.Device.GetMemoryInfo()
	return ret == nvml.ERROR_GPU_IS_LOST
}

// keepLeftovers records the devices a release left on lost GPUs and then
// deletes the claim's record, so that the kubelet's unprepare succeeds. A
// leftover whose GPU is still lost is written again with what is left of
// it, and stays (the error says so). The caller holds the claim's lock
// and its GPUs' locks.
func (s *State) keepLeftovers(logger klog.Logger, rec checkpoint.PreparedClaim, lost []checkpoint.PreparedDevice) error {
	_, isLeftover := leftoverOf(rec.UID)
	uid := rec.UID
	if !isLeftover {
		// A name no record has: names of this claim's leftovers are only
		// made under its lock, and ReleaseLeftovers only deletes them.
		for n := 1; ; n++ {
			if _, taken := s.Ledger.Get(leftoverUID(rec.UID, n)); !taken && !s.Ledger.Newer(leftoverUID(rec.UID, n)) {
				uid = leftoverUID(rec.UID, n)
				break
			}
		}
	}
	left := checkpoint.PreparedClaim{UID: uid, State: checkpoint.PrepareStarted, Devices: lost, BootID: rec.BootID}
	if err := s.Ledger.Record(left); err != nil {
		return fmt.Errorf("record what stays on a lost GPU: %w", err)
	}
	lerr := &LostGPUError{Record: uid}
	seen := map[string]bool{}
	for _, d := range lost {
		lerr.Devices = append(lerr.Devices, d.Device)
		if g := ledger.Of(d).GPU; !seen[g] {
			seen[g] = true
			lerr.GPUs = append(lerr.GPUs, g)
		}
	}
	if isLeftover {
		return lerr
	}
	logger.Info("Unprepared a claim whose GPU is lost; what stays on that GPU is released when it answers again",
		"claim", klog.KRef(rec.Namespace, rec.Name), "claimUID", rec.UID, "leftover", uid, "devices", lerr.Devices, "gpus", lerr.GPUs)
	return s.Ledger.Release(rec.UID)
}

// ReleaseLeftovers releases the leftovers (what unprepares left on lost
// GPUs) whose GPUs all answer again, each under the locks an unprepare
// takes, and returns how many it released. A leftover whose GPU is still
// lost is left without a try.
func (s *State) ReleaseLeftovers(ctx context.Context) (int, error) {
	logger := klog.FromContext(ctx)
	count := 0
	var errs []error
	for _, rec := range s.Ledger.Claims() {
		if _, ok := leftoverOf(rec.UID); !ok || s.anyGPULost(rec) {
			continue
		}
		done, err := s.releaseLeftover(ctx, rec.UID)
		if errors.Is(err, checkpoint.ErrSuperseded) {
			return count, err
		}
		if err != nil {
			logger.Error(err, "Releasing what an unprepare left on a GPU that was lost", "leftover", rec.UID)
			errs = append(errs, err)
			continue
		}
		if done {
			logger.Info("Released what an unprepare left on a GPU that was lost", "leftover", rec.UID)
			count++
		}
	}
	return count, errors.Join(errs...)
}

func (s *State) releaseLeftover(ctx context.Context, uid types.UID) (bool, error) {
	leave, err := s.enter()
	if err != nil {
		return false, err
	}
	defer leave()
	defer s.claimLocks.Lock(string(uid))()
	cur, ok := s.Ledger.Get(uid)
	if !ok {
		return false, nil // released meanwhile
	}
	_, err = s.reconcile(ctx, cur, released, serving)
	return err == nil, err
}

// anyGPULost reports whether a device of a record is on a lost GPU.
func (s *State) anyGPULost(rec checkpoint.PreparedClaim) bool {
	for _, d := range rec.Devices {
		if s.gpuLost(d) {
			return true
		}
	}
	return false
}
