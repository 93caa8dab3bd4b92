// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestRegistered(t *testing.T) {
	for _, tc := range []struct{ name, text, want string }{
		{"plain socket", "plugin_manager_total_plugins{socket_path=\"/k/plugins_registry/gpu.nvidia.com-reg.sock\",state=\"actual_state_of_world\"} 1\n", "yes"},
		{"only desired", "plugin_manager_total_plugins{socket_path=\"/k/plugins_registry/gpu.nvidia.com-reg.sock\",state=\"desired_state_of_world\"} 1\n", "no"},
		{"another driver", "plugin_manager_total_plugins{socket_path=\"/k/plugins_registry/other-reg.sock\",state=\"actual_state_of_world\"} 1\n", "no"},
		{"rolling-update socket of this pod", "plugin_manager_total_plugins{socket_path=\"/k/plugins_registry/gpu.nvidia.com-u1-reg.sock\",state=\"actual_state_of_world\"} 1\n", "yes"},
		{"kubelet lists no plugin", "", "no"},
		{"garbage", "{{{", "unknown"},
	} {
		if got := registered(tc.text, "gpu.nvidia.com", []types.UID{"u1"}); got != tc.want {
			t.Errorf("%s: registered = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestFilterMetrics(t *testing.T) {
	in := "# HELP gpu_dra_errors_total x\n# TYPE gpu_dra_errors_total counter\ngpu_dra_errors_total{operation=\"prepare\"} 2\ngo_goroutines 12\n"
	want := "# HELP gpu_dra_errors_total x\n# TYPE gpu_dra_errors_total counter\ngpu_dra_errors_total{operation=\"prepare\"} 2\n"
	if got := FilterMetrics(in, "gpu_dra_"); got != want {
		t.Errorf("FilterMetrics = %q, want %q", got, want)
	}
	if got := prepareErrors(want); got != 2 {
		t.Errorf("prepareErrors = %g, want 2", got)
	}
}
