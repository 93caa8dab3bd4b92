// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// TestOwnershipProperty's sharing: MPS on whole GPUs and MIG devices,
// memory fractions (shares of one GPU under its MPS daemon), and the
// published profiles and monitor devices changed between restarts. The
// daemons are the propRunner's; every start and stop of one is a kill
// point.

// fewProfiles is what --mig-profiles lists in the "fewer profiles" setting.
var fewProfiles = map[string]bool{"1g.10gb": true, "3g.40gb": true, "7g.80gb": true}

// propRunner runs MPS daemons as entries of a map: a started daemon has
// its control pipe, as NVIDIA's makes it.
type propRunner struct {
	k       *killer
	mu      sync.Mutex
	running map[string]bool
	// beside runs while a daemon starts, before its starter records it
	// (property_reload_test.go: the start-up sweep).
	beside func(uuid string)
}

func (r *propRunner) Start(_ context.Context, d *sharing.Daemon) error {
	r.k.point()
	if err := os.MkdirAll(d.PipeDir(), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(d.ControlPipe(), nil, 0o600); err != nil {
		return err
	}
	r.mu.Lock()
	r.running[d.DeviceUUID] = true
	r.mu.Unlock()
	if r.beside != nil {
		r.beside(d.DeviceUUID)
	}
	r.k.point()
	return nil
}

func (r *propRunner) Running(_ context.Context, d *sharing.Daemon) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[d.DeviceUUID], nil
}

func (r *propRunner) Stop(_ context.Context, d *sharing.Daemon) error {
	r.k.point()
	r.mu.Lock()
	delete(r.running, d.DeviceUUID)
	r.mu.Unlock()
	return os.RemoveAll(d.PipeDir())
}

func (r *propRunner) List(context.Context) ([]string, error) { return r.names(), nil }

func (r *propRunner) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.running))
	for n := range r.running {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (r *propRunner) count() int { return len(r.names()) }

// reboot: every daemon ends with the node.
func (r *propRunner) reboot() {
	r.mu.Lock()
	clear(r.running)
	r.mu.Unlock()
}

func (p *prop) getter() ClaimGetter {
	claims := map[string]any{}
	for _, lc := range p.live {
		claims[lc.c.Name] = lc.c
	}
	return getter(claims)
}

// prepareShared prepares a claim of one device under MPS, or a memory
// fraction of a whole GPU (a share: several claims on one GPU, all under
// its MPS daemon, which the scheduler's counters allow and nothing else
// on the GPU).
func (p *prop) prepareShared(whole, migs []string) {
	p.next++
	uid := types.UID(fmt.Sprintf("uid-%d", p.next))
	if len(whole) > 0 && p.rng.IntN(2) == 0 {
		name := whole[p.rng.IntN(len(whole))]
		if p.shareBlocked(name) {
			return
		}
		c := claim(uid, dev(name))
		r := &c.Status.Allocation.Devices.Results[0]
		id := types.UID(fmt.Sprintf("share-%d", p.next))
		r.ShareID = &id
		r.ConsumedCapacity = map[resourceapi.QualifiedName]resource.Quantity{capMemory: resource.MustParse("10Gi")}
		p.ops["fraction"]++
		p.addShared(c)
		return
	}
	names := append(append([]string(nil), whole...), migs...)
	if len(names) == 0 {
		return
	}
	name := names[p.rng.IntN(len(names))]
	if d := p.n.devices[name]; p.conflicts(d) || p.instanceCapReached(d) {
		return
	}
	c := claim(uid, dev(name))
	c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, opaque(resourceapi.AllocationConfigSourceClaim, testDriver, []string{"gpu"}, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS"}}`))
	if p.n.devices[name].Kind.IsMIG() {
		c.Status.Allocation.Devices.Config[0].Opaque.Parameters.Raw = []byte(`{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS"}}`)
	}
	p.ops["mps"]++
	p.addShared(c)
}

// addShared prepares a claim under MPS; with MPS not offered (mpsOff) it
// is refused, and the kubelet unprepares it.
func (p *prop) addShared(c *resourceapi.ResourceClaim) {
	if !p.mpsOff {
		p.addLive(c)
		return
	}
	p.ops["refused: MPS off"]++
	if _, err := p.n.state.Prepare(p.t.Context(), c); err == nil {
		p.fail("claim %s under MPS prepared with MPS turned off", c.UID)
	}
	if err := p.n.state.Unprepare(p.t.Context(), ref(c)); err != nil {
		p.fail("unprepare refused claim %s: %v", c.UID, err)
	}
}

func (p *prop) addLive(c *resourceapi.ResourceClaim) {
	lc := &liveClaim{c: c}
	for _, r := range c.Status.Allocation.Devices.Results {
		lc.devices = append(lc.devices, r.Device)
		lc.held = append(lc.held, p.n.devices[r.Device])
	}
	p.live[c.UID] = lc
	p.prepareLive(lc, true)
}

// shareBlocked: the scheduler does not allocate a share of a GPU that
// anything but shares of it holds (admin access aside), nor a ninth 10Gi
// share of 80Gi.
func (p *prop) shareBlocked(name string) bool {
	d := p.n.devices[name]
	shares := 0
	for _, lc := range p.live {
		for i, held := range lc.devices {
			r := lc.c.Status.Allocation.Devices.Results[i]
			if r.AdminAccess != nil {
				continue
			}
			if held == name && r.ShareID != nil {
				shares++
				continue
			}
			if have := p.n.devices[held]; (have != nil && devicesOverlap(have, d)) || (have == nil && p.lostOverlap(held, d)) {
				return true
			}
		}
	}
	return shares >= 8
}

// checkDaemons: the MPS daemon of every restored live claim runs once the
// supervisor had its turn, and no daemon runs that no record uses.
func (p *prop) checkDaemons(records []checkpoint.PreparedClaim, unrestored map[types.UID]bool) {
	if err := p.n.state.SuperviseSharingOnce(p.t.Context()); err != nil {
		p.fail("supervise: %v", err)
	}
	used := map[string]bool{}
	for _, rec := range records {
		for _, d := range rec.Devices {
			if d.Sharing != nil && d.Sharing.Strategy == configapi.MpsStrategy && d.Sharing.Target != "" {
				used[d.Sharing.Target] = true
			}
		}
	}
	for _, name := range p.mps.names() {
		if !used[name] {
			p.fail("MPS daemon of %s runs, and no record uses it", name)
		}
	}
	for uid, lc := range p.live {
		rec, ok := p.n.store.Get(uid)
		if lc.newer != nil || unrestored[uid] || !ok || rec.State != checkpoint.PrepareCompleted {
			continue
		}
		for _, d := range rec.Devices {
			if d.Sharing != nil && d.Sharing.Strategy == configapi.MpsStrategy && !p.lost[p.gpuIndex(recordedGPU(d))] && !p.mps.isRunning(d.Sharing.Target) {
				p.fail("live claim %s has no MPS daemon for %s", uid, d.Device)
			}
		}
	}
}

func (r *propRunner) isRunning(uuid string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[uuid]
}

func (p *prop) toggleMonitors() {
	p.noMonitors = !p.noMonitors
	p.restart()
}

func (p *prop) toggleProfiles() {
	p.fewProfiles = !p.fewProfiles
	p.restart()
}
