// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"fmt"
	"strings"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// --simulate-node-profiles: one DaemonSet simulating a mixed fleet. Every
// plugin pod gets the same list (chart value simulate.nodeProfiles) and
// picks its own node's entry, so a cluster of CPU-only nodes can stand in
// for H100 nodes next to A100 nodes without a DaemonSet per model.

// nodeProfile returns the profile that entries ("node=profile") give
// node, or def when none names it. A malformed entry, a node named twice
// or a profile the simulator does not know fails start, whichever node
// it names: a typo in the list should not wait for its node to show it.
func nodeProfile(entries []string, node, def string) (string, error) {
	seen := map[string]bool{}
	profile := def
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		name, p, ok := strings.Cut(e, "=")
		if !ok || name == "" || p == "" {
			return "", fmt.Errorf("--simulate-node-profiles: entry %q is not <node>=<profile>, e.g. gpu-node-2=a100-80gbx4", e)
		}
		if seen[name] {
			return "", fmt.Errorf("--simulate-node-profiles: node %q is named twice", name)
		}
		seen[name] = true
		if _, err := simulate.ParseProfile(p); err != nil {
			return "", fmt.Errorf("--simulate-node-profiles: node %q: %w", name, err)
		}
		if name == node {
			profile = p
		}
	}
	return profile, nil
}
