// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package deviceattr

import (
	"fmt"
	"strconv"
	"strings"
)

// MIG device names. A dynamic MIG device has no UUID until it is created,
// so monitoring tools that map a pod's DRA devices to GPUs read its
// identity from its name. dcgm-exporter (NVIDIA/dcgm-exporter
// internal/pkg/transformation/dra.go, parseDRAMigSpec, called from
// buildDeviceMapping for a "mig" device without a uuid attribute) matches
// `^gpu-(\d+)-mig-.+-(\d+)-(\d+)$` as the parent's minor, the GPU instance
// profile ID and the placement start, NVIDIA's reference driver's naming.
// A static MIG device publishes its uuid, which the exporter reads
// instead, so its name stays as it was.

// DynamicMigDeviceName names a dynamic MIG device after its parent's minor,
// its profile, the profile's GPU instance profile ID and its placement
// start: "gpu-0-mig-1g10gb-19-3" for an H100's 1g.10gb at start 3. The ID
// is the one NVML reports for the GPU (nvmlGpuInstanceProfileInfo_t.id, the
// ID column of `nvidia-smi mig -lgip`: 19 for an H100's 1g.10gb, 15 for an
// A100-40GB's 1g.10gb; nvdev.MigProfile.GIProfileID), not a table of ours.
// Placement, not creation order, identifies the device, so the name is the
// same before and after it exists.
func DynamicMigDeviceName(parentMinor int, profile string, giProfileID int, start uint32) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d-%d", parentMinor, nameProfile(profile), giProfileID, start)
}

// MigDeviceName names a static MIG device (one an admin made): "gpu-0-mig-
// 1g10gb-3". Dynamic MIG devices had the same form before their names
// carried the profile ID (LegacyName); claims allocated then still carry
// it.
func MigDeviceName(parentMinor int, profile string, start uint32) string {
	return fmt.Sprintf("gpu-%d-mig-%s-%d", parentMinor, nameProfile(profile), start)
}

// nameProfile is a profile as device names spell it: without "." and "+"
// (DNS labels), "1g10gbme" for "1g.10gb+me". NVIDIA's profile names end in
// a memory size or a suffix ("gb", "+me", "+gfx"), never in "-<digits>",
// which is what tells the two name forms apart (ParseMigDeviceName).
func nameProfile(profile string) string {
	return strings.NewReplacer(".", "", "+", "").Replace(profile)
}

// MigName is what a MIG device's name says.
type MigName struct {
	ParentMinor int
	// Profile is the profile as the name spells it (nameProfile: "1g10gb");
	// the profile attribute has the real one.
	Profile string
	// GIProfileID is the GPU instance profile ID, or -1 where the name
	// carries none (a static MIG device, or a dynamic one named before the
	// IDs were added).
	GIProfileID int
	Start       uint32
}

// ParseMigDeviceName reads both forms of MIG device names: the parent's
// minor, the profile as the name spells it, the profile ID where the name
// has one, and the placement start. ok is false for other device names
// ("gpu-3", "gpu-3-monitor", "gpu-3-vfio").
func ParseMigDeviceName(name string) (n MigName, ok bool) {
	rest, found := strings.CutPrefix(name, "gpu-")
	if !found {
		return MigName{}, false
	}
	minor, rest, found := strings.Cut(rest, "-mig-")
	if !found {
		return MigName{}, false
	}
	head, start, found := cutLast(rest)
	if !found {
		return MigName{}, false
	}
	m, err1 := strconv.Atoi(minor)
	s, err2 := strconv.ParseUint(start, 10, 32)
	if err1 != nil || err2 != nil || !digits(minor) || strings.HasSuffix(head, "-") {
		return MigName{}, false
	}
	n = MigName{ParentMinor: m, Profile: head, GIProfileID: -1, Start: uint32(s)}
	if profile, id, found := cutLast(head); found && digits(id) {
		if v, err := strconv.Atoi(id); err == nil {
			n.Profile, n.GIProfileID = profile, v
		}
	}
	return n, true
}

// LegacyName is the name the releases before the profile IDs gave a
// dynamic MIG device ("gpu-0-mig-1g10gb-3" for gpu-0-mig-1g10gb-19-3);
// ok is false for a name that carries no profile ID (it is that form
// already).
func (n MigName) LegacyName() (string, bool) {
	if n.GIProfileID < 0 {
		return "", false
	}
	return fmt.Sprintf("gpu-%d-mig-%s-%d", n.ParentMinor, n.Profile, n.Start), true
}

// LegacyMigDeviceName is LegacyName for a device name; ok is false for
// names that are not a dynamic MIG device's in the current form.
func LegacyMigDeviceName(name string) (string, bool) {
	n, ok := ParseMigDeviceName(name)
	if !ok {
		return "", false
	}
	return n.LegacyName()
}

// cutLast splits s at its last "-" into two non-empty parts.
func cutLast(s string) (before, after string, found bool) {
	i := strings.LastIndex(s, "-")
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
