// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
)

// TestOwnershipProperty's static MIG: an admin partitions an idle GPU
// (two 3g.40gb devices, as mig-parted would) and removes the layout again
// when nothing holds the GPU; a reboot takes the devices away and the
// admin's boot-time configuration makes them again, with new UUIDs, before
// the plugin starts. The node publishes them as they are (no whole GPU, no
// dynamic MIG devices, no VM device on such a GPU).

// staticLayout is the admin's layout: start of each 3g.40gb device.
var staticLayout = []uint32{0, 4}

func staticName(minor int, start int) string { return fmt.Sprintf("mig-%d-static-%d", minor, start) }

// publishStatic publishes a statically partitioned GPU's MIG devices and
// its monitor device.
func (p *prop) publishStatic(out map[string]*AllocatableDevice, g *nvdev.GPU, held map[string]bool) {
	if !p.noMonitors || held[monitorName(g.Minor)] {
		out[monitorName(g.Minor)] = &AllocatableDevice{Name: monitorName(g.Minor), Kind: configapi.Monitor, GPU: g}
	}
	existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles)
	if err != nil {
		p.fail("list the admin's MIG devices on GPU %d: %v", g.Minor, err)
	}
	for _, m := range existing {
		name := staticName(g.Minor, int(m.Placement.Start))
		out[name] = &AllocatableDevice{Name: name, Kind: configapi.MIG, GPU: g, StaticUUID: m.UUID, GIID: m.GIID, CIID: m.CIID,
			Placement: mig.Placement{Profile: m.Profile, Start: m.Placement.Start, Size: m.Placement.Size}}
	}
}

// gpuHeld reports whether a record holds anything of GPU minor.
func (p *prop) gpuHeld(minor int) bool {
	records, _ := p.n.store.Owning()
	for _, rec := range records {
		for _, f := range ledger.Footprints(rec) {
			if f.GPU == p.gpus[minor].UUID {
				return true
			}
		}
	}
	return false
}

func (p *prop) toggleStatic() {
	m := p.rng.IntN(len(p.gpus))
	if p.lost[m] || p.gpuHeld(m) {
		return // an admin repartitions an idle GPU only
	}
	if p.static[m] {
		p.removeLayout(m)
		p.static[m] = false
	} else {
		p.createLayout(m)
		p.static[m] = true
	}
	p.ops["static-mig"]++
	p.restart()
}

func (p *prop) createLayout(m int) {
	g := p.n.inv.GPUs[m] // the plain handle: the admin's tool, not the plugin
	var prof nvdev.MigProfile
	for _, pr := range g.MigProfiles {
		if pr.Name == "3g.40gb" {
			prof = pr
		}
	}
	for _, start := range staticLayout {
		if _, err := mig.Create(g.Device, mig.Placement{Profile: prof, Start: start, Size: 4}); err != nil {
			p.fail("admin's MIG device at %d on GPU %d: %v", start, m, err)
		}
	}
}

func (p *prop) removeLayout(m int) {
	g := p.n.inv.GPUs[m]
	existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles)
	if err != nil {
		return // MIG mode off: nothing there
	}
	for _, d := range existing {
		if err := mig.Destroy(g.Device, d.GIID, d.CIID); err != nil {
			p.fail("remove the admin's MIG device on GPU %d: %v", m, err)
		}
	}
	if err := mig.DisableIfEmpty(g.Device, g.MigProfiles); err != nil {
		p.fail("MIG mode off on GPU %d: %v", m, err)
	}
}

// staticLayoutsAtBoot makes the admin's layouts again after a reboot.
func (p *prop) staticLayoutsAtBoot() {
	for m, on := range p.static {
		if on {
			p.createLayout(m)
		}
	}
}

// removeStaticLayouts: at the end, the admin takes the layouts away.
func (p *prop) removeStaticLayouts() {
	for m, on := range p.static {
		if on {
			p.removeLayout(m)
		}
	}
	clear(p.static)
}
