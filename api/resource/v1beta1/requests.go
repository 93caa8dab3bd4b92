// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package v1beta1

import "strings"

// SelectsRequest reports whether a config entry whose `requests` list is
// requests applies to the claim request named request, which may be
// "request/subrequest" for a request with firstAvailable. An empty list
// selects every request. The config resolver (Configs, resolve.go) that
// both the kubelet plugin and the admission webhook use decides with it.
func SelectsRequest(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	for _, r := range requests {
		if r == request || r == parent {
			return true
		}
	}
	return false
}
