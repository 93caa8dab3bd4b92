// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"slices"
	"strings"
	"testing"
)

// kubeletPlugin.monitorDevices=false drops the monitor class and its
// admission policy and tells the plugin not to publish monitor devices;
// the default keeps all three.
func TestChartMonitorDevicesValue(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want bool
	}{{nil, true}, {[]string{"kubeletPlugin.monitorDevices=false"}, false}} {
		out := string(helmTemplate(t, tc.set...))
		if got := slices.Contains(classNames(t, tc.set...), "monitor.gpu.nvidia.com"); got != tc.want {
			t.Errorf("%v: monitor class rendered %v, want %v", tc.set, got, tc.want)
		}
		if got := strings.Contains(out, "-monitor-admin-access"); got != tc.want {
			t.Errorf("%v: monitor admission policy rendered %v, want %v", tc.set, got, tc.want)
		}
		flag := "--monitor-devices=true"
		if !tc.want {
			flag = "--monitor-devices=false"
		}
		if !strings.Contains(out, flag) {
			t.Errorf("%v: plugin args lack %s", tc.set, flag)
		}
	}
}
