// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package simulate

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A simulated node has a boot ID in <Dir>/boot_id, in the format of the
// kernel's /proc/sys/kernel/random/boot_id: a random (version 4) UUID in
// lower-case hex with dashes, 36 characters and a newline. It is created
// when the directory has none and kept otherwise (a restarted plugin is not
// a rebooted node); Reboot replaces it. A driver reads it as it reads the
// kernel's file, so it needs nothing from this package.
//
// <Dir>/rebooted exists once the node was rebooted. MIG device UUIDs
// include the boot ID only from then on (migUUID): a node that never
// rebooted names its MIG devices as simulators before Reboot existed did,
// so a driver of an earlier release (a downgrade, see test/e2e) and this
// one agree on every MIG device of such a node.

const bootIDLen = 36

// BootIDPath is the simulated /proc/sys/kernel/random/boot_id.
func (s *Simulator) BootIDPath() string { return filepath.Join(s.Dir, "boot_id") }

// BootID is the node's current boot ID, without the newline.
func (s *Simulator) BootID() string {
	id, _ := s.bootID.Load().(string)
	return id
}

// rebootedPath is the marker of a node that was rebooted at least once.
func (s *Simulator) rebootedPath() string { return filepath.Join(s.Dir, "rebooted") }

// migSalt is what MIG device UUIDs derive from besides the GPU and the
// placement: nothing on a node that never rebooted, the boot ID after.
func (s *Simulator) migSalt() string {
	if !s.rebooted.Load() {
		return ""
	}
	return s.BootID()
}

// markRebooted records, durably, that the node was rebooted.
func (s *Simulator) markRebooted() error {
	if err := os.WriteFile(s.rebootedPath(), nil, 0o644); err != nil {
		return fmt.Errorf("mark the simulated node rebooted: %w", err)
	}
	s.rebooted.Store(true)
	return nil
}

// loadBootID reads the boot ID, creating it when it is missing or not in
// the kernel's format, and whether the node was rebooted.
func (s *Simulator) loadBootID() error {
	_, err := os.Stat(s.rebootedPath())
	s.rebooted.Store(err == nil)
	path := s.BootIDPath()
	if id, ok := readBootID(path); ok {
		s.bootID.Store(id)
		return nil
	}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return fmt.Errorf("create simulated node dir: %w", err)
	}
	id, err := newBootID()
	if err != nil {
		return err
	}
	// Another process starting on the same directory may create one at
	// the same moment: the first one written wins, for both.
	if err := writeBootID(path, id, false); err != nil {
		return err
	}
	if got, ok := readBootID(path); ok {
		id = got
	}
	s.bootID.Store(id)
	return nil
}

// newBootID returns a random version 4 UUID, as the kernel's boot_id is.
func newBootID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("simulated boot ID: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// validBootID reports whether id has the kernel's boot_id form.
func validBootID(id string) bool {
	if len(id) != bootIDLen {
		return false
	}
	for i, c := range id {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdef", c) {
				return false
			}
		}
	}
	return true
}

func readBootID(path string) (string, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	id, ok := strings.CutSuffix(string(data), "\n")
	return id, ok && validBootID(id)
}

// writeBootID writes the boot ID file whole, never torn: through a
// temporary file that is renamed over the old one (replace) or linked to
// the name only when no valid one exists yet.
func writeBootID(path, id string, replace bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".boot_id-*")
	if err != nil {
		return fmt.Errorf("write simulated boot ID: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(id + "\n")
	if err := errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); err != nil {
		return fmt.Errorf("write simulated boot ID: %w", err)
	}
	if !replace {
		err := os.Link(tmp.Name(), path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("write simulated boot ID: %w", err)
		}
		if _, ok := readBootID(path); ok {
			return nil
		}
		// A malformed file (written by hand): replace it.
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write simulated boot ID: %w", err)
	}
	return nil
}
