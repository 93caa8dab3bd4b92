// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// TestOwnershipProperty's issue 47 events: the driver reloaded within one
// boot while a GPU is away (on vfio-pci for a VM, or lost), so that the
// GPUs after it are numbered again; feature gates and chart values turned
// off and on for the whole node between starts (DynamicMIG, passthrough,
// MPS, monitor devices: toggleMonitors); and the start-up sweep of unowned
// MPS daemons running beside the prepares that start daemons.

// driverReload reloads nvidia.ko in the same boot: the boot ID stays,
// every CDI spec stays, and the GPUs NVML sees get minors 0, 1, ... in
// order while an absent one (lost, or bound to vfio-pci) gets one after
// them; every MIG device of a GPU on nvidia is gone (MIG mode stays), the
// admin's layouts on them are made again by the admin's tooling, and MPS
// daemons end (nothing may hold the driver). Without an absent GPU a reload
// renumbers nothing, so one is lost first.
func (p *prop) driverReload() {
	away := map[int]bool{}
	for i, g := range p.gpus {
		if p.lost[i] || p.n.sim.BoundDriver(g.PCIBusID) == vfio.DriverVFIO {
			away[i] = true
		}
	}
	if len(away) == 0 || len(away) == len(p.gpus) {
		m := p.rng.IntN(len(p.gpus))
		clear(away)
		away[m] = true
		p.lost[m] = true
	}
	next, moved := 0, false
	for i := range p.gpus {
		if !away[i] {
			moved = moved || p.gpus[i].Minor != next
			p.gpus[i].Minor = next
			next++
		}
	}
	for i := range p.gpus {
		if away[i] {
			moved = moved || p.gpus[i].Minor != next
			p.gpus[i].Minor = next
			next++
			continue
		}
		g := p.n.inv.GPUs[i] // the plain handle: the driver's unload, not the plugin
		existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles)
		if err != nil {
			continue // MIG mode off: no MIG device
		}
		for _, m := range existing {
			if err := mig.Destroy(g.Device, m.GIID, m.CIID); err != nil {
				p.fail("driver reload: MIG device %d of GPU %s: %v", m.GIID, g.UUID, err)
			}
		}
	}
	for m, on := range p.static {
		if on && !away[m] {
			p.createLayout(m)
		}
	}
	for _, lc := range p.live {
		if lc.newer != nil {
			lc.rebooted = true // its MIG devices went with the driver; the newer driver restores them
		}
	}
	p.mps.reboot()
	if moved {
		p.ops["minors renumbered by a driver reload"]++
	}
	p.restart()
}

// toggleDynamicMIGGate turns the DynamicMIG gate off or on for the node.
// Off, a GPU is published whole (and as its monitor and VM device); one
// whose dynamic MIG devices records hold keeps them published as held, or,
// in the other half of the flips, its node publishes nothing of them (the
// worst a table can do): each claim keeps its MIG device all the same, and
// its unprepare destroys it and turns MIG mode off from its record alone.
func (p *prop) toggleDynamicMIGGate() {
	p.dynOff = !p.dynOff
	p.heldHidden = p.dynOff && p.rng.IntN(2) == 0
	p.restart()
}

// togglePassthroughGate turns passthrough off or on for every GPU; a VM's
// GPU keeps its device published while its claim holds it.
func (p *prop) togglePassthroughGate() {
	p.ptAllOff = !p.ptAllOff
	p.restart()
}

// toggleMPSGate takes MPS out of the sharing strategies the node offers,
// or puts it back: new claims under MPS (memory fractions included) are
// refused, kept ones keep their daemons and have them stopped at
// unprepare.
func (p *prop) toggleMPSGate() {
	p.mpsOff = !p.mpsOff
	p.restart()
}

var errKilled = errors.New("killed")

// sweepBeside runs, in the middle of a daemon's start (the prepare or
// supervisor that starts it holds its GPU's lock and has not recorded
// it), the start-up sweep of unowned MPS daemons, as RemoveStale runs it
// in the background beside the kubelet's calls, and waits for it.
func (p *prop) sweepBeside(uuid string) {
	p.ops["sweep beside a daemon's start"]++
	if strings.HasPrefix(uuid, "MIG-") {
		p.ops["sweep beside a MIG device's daemon's start"]++
	}
	done := make(chan error, 1)
	go func() {
		// A kill point passed in here ends this goroutine only.
		err := errKilled
		defer func() { done <- err }()
		_, err = p.n.state.RemoveStale(context.Background(), p.getter())
	}()
	if err := <-done; err != nil && err != errKilled {
		p.fail("sweep beside a prepare: %v", err)
	}
}

// fifoInCDIDir puts a FIFO where a claim's CDI spec would be (something
// else on the node made it: the CDI directory is every CDI user's) and
// restarts the plugin: start reads the CDI directory, and a blocking read
// of it would hang start for ever (restart's watchdog fails the test).
func (p *prop) fifoInCDIDir() {
	p.next++
	uid := types.UID(fmt.Sprintf("fifo-%d", p.next))
	if err := syscall.Mkfifo(p.n.cdi.SpecPath(uid), 0o644); err != nil {
		p.fail("mkfifo: %v", err)
	}
	p.k.fifos = append(p.k.fifos, p.n.cdi.SpecPath(uid))
	p.restart()
	if _, err := os.Lstat(p.n.cdi.SpecPath(uid)); !errors.Is(err, os.ErrNotExist) {
		p.fail("the FIFO in place of a CDI spec of no claim is still there after start: %v", err)
	}
}

// startWatchdog bounds a start: one that blocks (on a FIFO, say) fails
// the test instead of hanging it.
const startWatchdog = 10 * time.Second

// runWithin is run, failing the test when op has not returned within d;
// a start blocked on one of the FIFOs the test made is let go first.
func (k *killer) runWithin(t *testing.T, d time.Duration, op func()) (killed bool) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	select {
	case <-done:
	case <-time.After(d):
		for _, f := range k.fifos {
			if w, err := os.OpenFile(f, os.O_RDWR|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		t.Fatalf("start did not return within %s: it blocks (on a FIFO the test put in the CDI directory?)", d)
	}
	return k.disarm()
}
