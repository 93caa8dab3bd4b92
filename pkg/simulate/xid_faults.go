// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"k8s.io/klog/v2"
)

// Event faults are injected through files too:
//
//	<uuid>.xid   holding "79" (an XID), "ecc-dbe" (a double-bit ECC
//	             error) or "94 <gi> <ci>" (an XID of one MIG instance):
//	             the event is delivered to the event sets once, and the
//	             GPU reports a pending recovery action (GPU reset) until
//	             the file is removed, as a real GPU does until it is reset.
//
// Files are noticed within xidWatchInterval while any event set exists
// (the health monitor keeps one open). Changing the content delivers the
// new event.

const xidWatchInterval = 200 * time.Millisecond

// applicationXIDs need no recovery action: NVIDIA's XID catalogue
// (https://docs.nvidia.com/deploy/xid-errors/) resolves them by restarting
// the application, and its tooling ignores them (k8s-device-plugin,
// internal/rm/health.go).
var applicationXIDs = map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}

type xidFaults struct {
	mu       sync.Mutex
	pending  map[string]bool   // GPU UUID -> recovery action pending
	seen     map[string]string // GPU UUID -> file content+mtime delivered
	watching bool
	primed   bool // the files present at start were scanned
}

func (s *Simulator) wireXIDFaults() {
	s.xids = &xidFaults{pending: map[string]bool{}, seen: map[string]string{}}
	for _, d := range s.Devices {
		dev := d.(*server.Device)
		dev.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
			if r := s.fault(dev.UUID); r != nvml.SUCCESS {
				return r
			}
			for i := range values {
				values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
				if values[i].FieldId != nvml.FI_DEV_GET_GPU_RECOVERY_ACTION {
					continue
				}
				action := nvml.GPU_RECOVERY_ACTION_NONE
				if s.RecoveryPending(dev.UUID) {
					action = nvml.GPU_RECOVERY_ACTION_GPU_RESET
				}
				values[i].NvmlReturn = uint32(nvml.SUCCESS)
				values[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_INT)
				values[i].Value = [8]byte{}
				binary.NativeEndian.PutUint32(values[i].Value[:4], uint32(action))
			}
			return nvml.SUCCESS
		}
	}
}

// RecoveryPending reports whether the GPU waits for a reset after an
// injected fault.
func (s *Simulator) RecoveryPending(uuid string) bool {
	s.xids.mu.Lock()
	defer s.xids.mu.Unlock()
	return s.xids.pending[uuid]
}

// clearRecovery ends a pending recovery action, as a GPU reset does.
func (s *Simulator) clearRecovery(uuid string) {
	s.xids.mu.Lock()
	delete(s.xids.pending, uuid)
	s.xids.mu.Unlock()
}

// SetXIDFault writes (or, with an empty spec, removes) the fault file of a
// GPU: spec is what the file holds ("79", "ecc-dbe", "94 1 0").
func (s *Simulator) SetXIDFault(uuid, spec string) error {
	return s.setMarker(filepath.Join(s.faultsDir(), uuid+".xid"), spec != "", []byte(spec+"\n"))
}

func (s *Simulator) notePending(uuid string, eventType, data uint64) {
	if eventType&nvml.EventTypeXidCriticalError != 0 && applicationXIDs[data] {
		return
	}
	if eventType&(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError) == 0 {
		return
	}
	s.xids.mu.Lock()
	s.xids.pending[uuid] = true
	s.xids.mu.Unlock()
}

// watchXIDFiles runs while event sets exist. Files that exist before the
// first scan are faults from before the process started: NVML does not
// deliver their events again, but their recovery action stays pending.
func (s *Simulator) watchXIDFiles() {
	s.xids.mu.Lock()
	if s.xids.watching {
		s.xids.mu.Unlock()
		return
	}
	s.xids.watching = true
	primed := s.xids.primed
	s.xids.primed = true
	s.xids.mu.Unlock()
	if !primed {
		s.scanXIDFiles(false)
	}
	go func() {
		for {
			s.events.mu.Lock()
			open := len(s.events.sets)
			s.events.mu.Unlock()
			if open == 0 {
				s.xids.mu.Lock()
				s.xids.watching = false
				s.xids.mu.Unlock()
				return
			}
			s.scanXIDFiles(true)
			time.Sleep(xidWatchInterval)
		}
	}()
}

// scanXIDFiles delivers the events of new or changed fault files (or, when
// deliver is false, only marks their recovery action pending).
func (s *Simulator) scanXIDFiles(deliver bool) {
	files, _ := filepath.Glob(filepath.Join(s.faultsDir(), "*.xid"))
	present := map[string]bool{}
	for _, f := range files {
		uuid := strings.TrimSuffix(filepath.Base(f), ".xid")
		info, err := os.Stat(f)
		if err != nil {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		present[uuid] = true
		key := string(data) + "@" + info.ModTime().String()
		s.xids.mu.Lock()
		delivered := s.xids.seen[uuid] == key
		s.xids.seen[uuid] = key
		s.xids.mu.Unlock()
		if delivered {
			continue
		}
		eventType, value, gi, ci, ok := parseXIDFault(string(data))
		if !ok {
			klog.Background().Info("Simulated fault file not understood; write an XID (79), ecc-dbe, or an XID with GPU and compute instance IDs (94 1 0)", "file", f, "content", strings.TrimSpace(string(data)))
			continue
		}
		if deliver {
			s.InjectEvent(uuid, eventType, value, gi, ci)
		} else {
			s.notePending(uuid, eventType, value)
		}
	}
	s.xids.mu.Lock()
	for uuid := range s.xids.seen {
		if !present[uuid] {
			delete(s.xids.seen, uuid)
			delete(s.xids.pending, uuid) // removing the file is the reset
		}
	}
	s.xids.mu.Unlock()
}

func parseXIDFault(content string) (eventType, value uint64, gi, ci uint32, ok bool) {
	fields := strings.Fields(content)
	if len(fields) == 0 {
		return 0, 0, 0, 0, false
	}
	gi, ci = NoInstance, NoInstance
	if len(fields) == 3 {
		g, err1 := strconv.ParseUint(fields[1], 10, 32)
		c, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, 0, 0, false
		}
		gi, ci = uint32(g), uint32(c)
	} else if len(fields) != 1 {
		return 0, 0, 0, 0, false
	}
	if fields[0] == "ecc-dbe" {
		return nvml.EventTypeDoubleBitEccError, 0, gi, ci, true
	}
	xid, err := strconv.ParseUint(fields[0], 10, 32)
	if err != nil || xid == 0 {
		return 0, 0, 0, 0, false
	}
	return nvml.EventTypeXidCriticalError, xid, gi, ci, true
}
