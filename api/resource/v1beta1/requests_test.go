// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import "testing"

func TestSelectsRequest(t *testing.T) {
	for _, tc := range []struct {
		requests []string
		request  string
		want     bool
	}{
		{nil, "gpu", true},
		{[]string{"gpu"}, "gpu", true},
		{[]string{"gpu"}, "mig", false},
		{[]string{"r"}, "r/slice", true},        // a parent selects its subrequests
		{[]string{"r/slice"}, "r/slice", true},  // and so does the subrequest itself
		{[]string{"r/whole"}, "r/slice", false}, // but not a sibling
		{[]string{"r/slice"}, "r", false},       // nor its parent
		{[]string{"a", "b"}, "b", true},
	} {
		if got := SelectsRequest(tc.requests, tc.request); got != tc.want {
			t.Errorf("SelectsRequest(%q, %q) = %v, want %v", tc.requests, tc.request, got, tc.want)
		}
	}
}
