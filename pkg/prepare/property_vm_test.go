// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// TestOwnershipProperty's VMs: GPUs passed through, monitor devices beside
// them, passthrough turned off and on, and reboots that renumber the buses
// (issue 38).

// prepareVMOrMonitor prepares a claim of one VM's GPU or one monitor
// device (admin access). The scheduler's counters keep a VM's GPU apart
// from every device of it that consumes counters, but a monitor device
// consumes none: such a pair is refused at prepare (pkg/ledger), and the
// claim then never runs; the kubelet unprepares it.
func (p *prop) prepareVMOrMonitor(names []string) {
	name := names[p.rng.IntN(len(names))]
	d := p.n.devices[name]
	admin := d.Kind == configapi.Monitor
	if !admin && p.conflicts(d) {
		return // the scheduler would not allocate it
	}
	p.next++
	uid := types.UID(fmt.Sprintf("uid-%d", p.next))
	c := claim(uid, result{request: "r0", device: name, admin: admin})
	lc := &liveClaim{c: c, devices: []string{name}, held: []*AllocatableDevice{d}}
	refused := p.vmConflict(d, admin)
	p.live[uid] = lc
	if !refused {
		p.ops[string(d.Kind)]++
		p.prepareLive(lc, true)
		return
	}
	p.ops["refused "+string(d.Kind)]++
	if _, err := p.n.state.Prepare(p.t.Context(), c); err == nil {
		p.fail("claim %s of %s prepared beside the other of a VM's GPU and admin access", uid, name)
	}
	if err := p.n.state.Unprepare(p.t.Context(), ref(c)); err != nil {
		p.fail("unprepare refused claim %s: %v", uid, err)
	}
	delete(p.live, uid)
}

// vmConflict: a VM's GPU and admin access to it exclude each other at
// prepare, which the scheduler does not see. The plugin goes by the
// hardware each claim holds, not by its device's name.
func (p *prop) vmConflict(d *AllocatableDevice, admin bool) bool {
	for _, lc := range p.live {
		for i, have := range lc.held {
			r := lc.c.Status.Allocation.Devices.Results[i]
			if have.GPU.UUID != d.GPU.UUID {
				continue
			}
			if (admin && have.Kind == configapi.VFIO) || (d.Kind == configapi.VFIO && r.AdminAccess != nil) {
				return true
			}
		}
	}
	return false
}

func (p *prop) togglePassthrough() {
	m := p.rng.IntN(len(p.gpus))
	p.ptOff[m] = !p.ptOff[m]
	p.restart()
}

// renumberBuses makes every VM record name the PCI address of another GPU
// than its own, as a reboot that renumbered the buses (a card added or
// moved) leaves them: the records of the boot before name where the GPUs
// were. Restore and unprepare must find each GPU by its UUID.
func (p *prop) renumberBuses() {
	for _, rec := range p.n.store.List() { // a newer driver's records are its own
		changed := false
		for i := range rec.Devices {
			v := rec.Devices[i].Vfio
			if v == nil {
				continue
			}
			for _, g := range p.gpus {
				if g.UUID != rec.Devices[i].UUID {
					v.PCIBusID = g.PCIBusID
					changed = true
					break
				}
			}
		}
		if changed {
			if err := p.n.store.Put(rec); err != nil {
				p.t.Fatal(err)
			}
		}
	}
}

// checkBindings: a GPU is on vfio-pci only while a record holds it for a
// VM, and a GPU that a live claim uses on the node (whole, MIG, shared)
// is on nvidia.
func (p *prop) checkBindings(records []checkpoint.PreparedClaim) {
	forVM := map[string]types.UID{}
	for _, rec := range records {
		for _, d := range rec.Devices {
			if d.Vfio != nil {
				forVM[d.UUID] = rec.UID
			}
		}
	}
	for _, g := range p.gpus {
		bound := p.n.sim.BoundDriver(g.PCIBusID)
		if bound == vfio.DriverVFIO && forVM[g.UUID] == "" {
			p.fail("GPU %d is bound to vfio-pci, and no record holds it for a VM", g.Minor)
		}
		if bound == vfio.DriverNvidia || forVM[g.UUID] == "" {
			continue
		}
		for _, rec := range records {
			if rec.UID == forVM[g.UUID] || !rec.Prepared() {
				continue
			}
			for _, d := range rec.Devices {
				if f := ledger.Of(d); f.GPU == g.UUID && !f.Admin {
					p.fail("GPU %d, which claim %s uses on the node, is on %q for VM claim %s", g.Minor, rec.UID, bound, forVM[g.UUID])
				}
			}
		}
	}
}
