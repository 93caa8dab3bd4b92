// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import "testing"

// A memory fraction's prepare result carries its share ID: without it the
// kubelet's PodResources API listed the share as the whole device, so
// monitoring (dcgm-exporter) could not tell the shares of a GPU apart.
func TestPreparedShareCarriesShareID(t *testing.T) {
	_, records, err := planState().plan(share(planClaim([]string{"gpu-0"}), "20Gi", ""))
	if err != nil {
		t.Fatal(err)
	}
	got := kubeletDevices(records)
	if len(got) != 1 || got[0].ShareID == nil || *got[0].ShareID != "share-1" || got[0].DeviceName != "gpu-0" {
		t.Fatalf("prepared share: %+v, want gpu-0 with share ID share-1", got)
	}
	_, records, err = planState().plan(planClaim([]string{"gpu-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := kubeletDevices(records); len(got) != 1 || got[0].ShareID != nil {
		t.Fatalf("prepared whole GPU: %+v, want no share ID", got)
	}
}
