// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import "github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/devkind"

// env is what device kinds reach on this node; addrTrusted says a
// record's PCI addresses are this boot's (addressTrusted).
func (s *State) env(addrTrusted bool) devkind.Env {
	return devkind.Env{Passthrough: s.Passthrough, Devices: s.Devices, Owners: s.Ledger.View, AddrTrusted: addrTrusted}
}
