// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Faults are injected through files under <dir>/faults, so that an operator
// can inject them into a running plugin as well as a test:
//
//	<uuid>.lost     every query on the GPU fails with GPU_IS_LOST
//	<uuid>.error    every query on the GPU fails with the NVML return code
//	                the file holds (a number, e.g. 999 for UNKNOWN)
//	<uuid>.in-use   another client holds the GPU: a MIG mode change stays
//	                pending (activation status IN_USE) and a reset fails
//	no-permission   the plugin runs without privileges: MIG mode changes
//	                and MIG instance creation and destruction fail with
//	                NO_PERMISSION, as they do without CAP_SYS_ADMIN or the
//	                mig/config capability
//	sysfs-delay-ms  every simulated sysfs write (sysfs.go) takes this long
//
// Queries that identify a GPU (index, minor number, UUID) keep working, so
// that discovery can name the GPU it leaves out. Markers made through these
// methods apply at once, files made by hand within a second.

func (s *Simulator) faultsDir() string { return filepath.Join(s.Dir, "faults") }

func (s *Simulator) faultPath(uuid string) string {
	return filepath.Join(s.faultsDir(), uuid+".lost")
}

// SetLost injects (or clears) a "GPU is lost" failure: NVML calls on that
// GPU then fail as they do when a real GPU falls off the bus.
func (s *Simulator) SetLost(uuid string, lost bool) error {
	return s.setMarker(s.faultPath(uuid), lost, nil)
}

// IsLost reports whether a lost-GPU failure is injected.
func (s *Simulator) IsLost(uuid string) bool {
	_, err := os.Stat(s.faultPath(uuid))
	return err == nil
}

// SetFault makes every query on a GPU fail with ret; SUCCESS clears it.
func (s *Simulator) SetFault(uuid string, ret nvml.Return) error {
	return s.setMarker(filepath.Join(s.faultsDir(), uuid+".error"), ret != nvml.SUCCESS, []byte(strconv.Itoa(int(ret))))
}

// SetInUse injects (or clears) another client holding the GPU.
func (s *Simulator) SetInUse(uuid string, inUse bool) error {
	return s.setMarker(filepath.Join(s.faultsDir(), uuid+".in-use"), inUse, nil)
}

// SetUnprivileged makes the simulated NVML refuse privileged operations
// with NO_PERMISSION (or allows them again).
func (s *Simulator) SetUnprivileged(on bool) error {
	return s.setMarker(filepath.Join(s.faultsDir(), "no-permission"), on, nil)
}

func (s *Simulator) setMarker(path string, on bool, data []byte) error {
	s.noFaultsAt.Store(0)
	if !on {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// anyFaults is false while no fault was ever injected, so that NVML calls
// (prepare makes dozens) need no file lookups then. A faults directory made
// by another process is noticed within faultsRecheck.
func (s *Simulator) anyFaults() bool {
	now := time.Now().UnixNano()
	if checked := s.noFaultsAt.Load(); checked != 0 && now-checked < int64(faultsRecheck) {
		return false
	}
	if _, err := os.Stat(s.faultsDir()); err == nil {
		return true
	}
	s.noFaultsAt.Store(now)
	return false
}

const faultsRecheck = time.Second

// fault is the return code every query on a GPU fails with, SUCCESS when
// none is injected.
func (s *Simulator) fault(uuid string) nvml.Return {
	if s.unboundUUID(uuid) {
		// Unbound from nvidia (sysfs.go): the driver no longer has it.
		return nvml.ERROR_GPU_IS_LOST
	}
	if !s.anyFaults() {
		return nvml.SUCCESS
	}
	if s.IsLost(uuid) {
		return nvml.ERROR_GPU_IS_LOST
	}
	data, err := os.ReadFile(filepath.Join(s.faultsDir(), uuid+".error"))
	if err != nil {
		return nvml.SUCCESS
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n == 0 {
		return nvml.ERROR_UNKNOWN
	}
	return nvml.Return(n)
}

func (s *Simulator) inUse(uuid string) bool {
	if !s.anyFaults() {
		return false
	}
	_, err := os.Stat(filepath.Join(s.faultsDir(), uuid+".in-use"))
	return err == nil
}

func (s *Simulator) unprivileged() bool {
	if !s.anyFaults() {
		return false
	}
	_, err := os.Stat(filepath.Join(s.faultsDir(), "no-permission"))
	return err == nil
}
