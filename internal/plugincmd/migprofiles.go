// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// migProfileName is how NVIDIA names a MIG profile (go-nvlib, as
// `nvidia-smi mig -lgip` prints it): "<slices>g.<memory>gb", and at most
// one attribute, "+me", "+me.all", "+gfx" or "-me" (no media extensions).
// Matching the form catches typos and the wrong kind of name (a resource
// name like "nvidia.com/mig-1g.10gb", a device name like "gpu-0-mig-1g10gb-19-0")
// that would otherwise just match no GPU and publish nothing for it.
var migProfileName = regexp.MustCompile(`^[0-9]+g\.[0-9]+gb([+-][a-z]+(\.[a-z]+)?)?$`)

// parseMigProfiles checks --mig-profiles and returns it with blanks
// trimmed ("1g.10gb, 3g.40gb" is what people type).
func parseMigProfiles(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		n = strings.TrimSpace(n)
		if !migProfileName.MatchString(n) {
			return nil, fmt.Errorf("--mig-profiles: %q is not a MIG profile name; use names as `nvidia-smi mig -lgip` prints them, e.g. --mig-profiles=1g.10gb,1g.10gb+me,3g.40gb", n)
		}
		out = append(out, n)
	}
	return out, nil
}

// logMigProfiles says, once at start, what --mig-profiles does on this
// node. Names no GPU here has are not an error (one chart value serves
// nodes of several models) but may be typos, so they are logged with the
// profiles the node has.
func logMigProfiles(logger klog.Logger, inv *nvdev.Inventory, o resourceslices.Options) {
	if len(o.MigProfiles) == 0 {
		return
	}
	if !o.DynamicMIG {
		logger.Info("--mig-profiles has no effect: the DynamicMIG feature gate is off, and MIG devices an admin created are always published", "migProfiles", o.MigProfiles)
		return
	}
	if absent := resourceslices.AbsentMigProfiles(inv, o.MigProfiles); len(absent) > 0 {
		logger.Info("Some --mig-profiles are not profiles of this node's GPUs; they publish nothing here", "absent", absent, "available", resourceslices.MigProfileNames(inv))
	}
}
