// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// TestRollingUpdateRegistrarSockets: whatever name the kubelet plugin
// helper gives a pod's registration socket (it depends on how long the
// kubelet's plugin directory is), diagnose counts it as that pod's, and not
// as another pod's.
func TestRollingUpdateRegistrarSockets(t *testing.T) {
	const driver = "gpu.nvidia.com"
	uid := types.UID("5d2b8f0e-7c1a-4e7b-9a53-0f4d2c6b1e88")
	other := types.UID("0b9e7a51-2f6c-4d3e-8a17-c4e5f6a7b8c9")
	seen := map[int]bool{}
	for _, n := range []int{1, 20, 40, 60, 80} {
		dir := "/" + strings.Repeat("d", n)
		name := kubeletplugin.RollingUpdateRegistrarSocketFile(dir, driver, uid)
		i := slices.Index(rollingUpdateRegistrarSockets(driver, uid), name)
		if i < 0 {
			t.Fatalf("dir of %d bytes: the library names the socket %q, not one of %q", n+1, name, rollingUpdateRegistrarSockets(driver, uid))
		}
		seen[i] = true
		text := fmt.Sprintf("plugin_manager_total_plugins{socket_path=%q,state=\"actual_state_of_world\"} 1\n", path.Join(dir, name))
		if got := registered(text, driver, []types.UID{uid}); got != "yes" {
			t.Errorf("%s: registered = %s for its pod, want yes", name, got)
		}
		if got := registered(text, driver, []types.UID{other}); got != "no" {
			t.Errorf("%s: registered = %s for another pod, want no", name, got)
		}
	}
	if len(seen) != 3 {
		t.Errorf("the directories exercised %d of the 3 names", len(seen))
	}
}
