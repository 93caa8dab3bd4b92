// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/vfio"
)

// TestOwnershipProperty (issues 28, 38 and 47): random sequences of
// prepare (whole GPUs, time-sliced, under MPS, memory fractions, admin
// access, monitor devices, dynamic and static MIG devices, GPUs passed
// through to VMs), unprepare, plugin restart, reboot (in which the buses
// may be renumbered, so that a VM's recorded PCI address names another
// GPU), a driver reload in the same boot that renumbers the GPUs' minors
// (property_reload_test.go), a GPU lost and back, an admin partitioning an
// idle GPU, chart values and feature gates changed per GPU and for the
// whole node (dynamic MIG, passthrough, MPS, monitor devices,
// --mig-profiles), downgrade and upgrade, the start-up sweep of unowned
// MPS daemons beside the prepares that start them, with kills
// (property_kill_test.go) at random points of prepares, unprepares, sysfs
// writes and start-up. After every
// step: no hardware is held by two claims, no MIG device, binding or CDI
// spec of a live claim is gone, no GPU is on vfio-pci that no VM claim
// holds, nothing is recorded or made for a claim that is not live; at the
// end, with every claim unprepared, nothing is left. GDRA_PROPERTY_STEPS
// and GDRA_PROPERTY_SEEDS run it longer.
func TestOwnershipProperty(t *testing.T) {
	steps, seeds := envInt("GDRA_PROPERTY_STEPS", 150), envInt("GDRA_PROPERTY_SEEDS", 4)
	for seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed+1), func(t *testing.T) {
			p := newProp(t, uint64(seed+1))
			for step := range steps {
				p.step = step
				p.randomStep()
				p.check()
			}
			p.finish()
			t.Logf("seed %d: %d steps, %d kills, %d kill points passed, ops %v", seed+1, steps, p.kills, p.k.points, p.ops)
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// liveClaim is a claim the kubelet believes prepared.
type liveClaim struct {
	c       *resourceapi.ResourceClaim
	devices []string
	// held is what each device was when the scheduler allocated it: the
	// hardware the claim owns, whatever its name means after a reboot
	// that renumbered the GPUs' minors.
	held []*AllocatableDevice
	// newer: a newer driver rewrote its record (downgraded since);
	// upgrade puts file back. rebooted: the node rebooted meanwhile.
	newer    []byte
	rebooted bool
	// hadSpec: its CDI spec was there when it was downgraded.
	hadSpec bool
}

type prop struct {
	t   *testing.T
	n   *node
	rng *rand.Rand
	k   *killer
	// gpus are the inventory's GPUs, their NVML handles wrapped with kill
	// points. The per-GPU state below is keyed by index in gpus (the
	// physical GPU); a GPU's Minor, and so its devices' names, may change
	// at a reboot.
	gpus   []*nvdev.GPU
	lost   map[int]bool
	migOff map[int]bool
	// ptOff: passthrough turned off for the GPU (--passthrough-gpus).
	ptOff map[int]bool
	// noMonitors: monitor devices turned off; fewProfiles: --mig-profiles
	// lists only some profiles. Held devices stay published either way.
	noMonitors, fewProfiles bool
	// dynOff: the DynamicMIG gate is off for the node; heldHidden: the
	// node then publishes nothing of the dynamic MIG devices records hold
	// (property_reload_test.go). ptAllOff: passthrough off for every GPU
	// (a VM's GPU stays published while held). mpsOff: MPS is not among
	// the strategies offered.
	dynOff, heldHidden, ptAllOff, mpsOff bool
	// static: an admin partitioned the GPU (static MIG devices).
	static map[int]bool
	mps    *propRunner
	live   map[types.UID]*liveClaim
	next   int
	step   int
	kills  int
	ops    map[string]int
}

func newProp(t *testing.T, seed uint64) *prop {
	n := newNode(t, "h100x2", true)
	p := &prop{t: t, n: n, rng: rand.New(rand.NewPCG(seed, 28)), k: &killer{}, lost: map[int]bool{}, migOff: map[int]bool{}, ptOff: map[int]bool{}, live: map[types.UID]*liveClaim{}, ops: map[string]int{}}
	p.mps = &propRunner{k: p.k, running: map[string]bool{}, beside: p.sweepBeside}
	p.static = map[int]bool{}
	host := n.sim.VFIO()
	write := host.Write
	host.Write = func(path, value string) error {
		p.k.point()
		err := write(path, value)
		p.k.point()
		return err
	}
	host.Timeout = 2e9
	n.passthrough = &PassthroughConfig{Host: host, Lookup: n.sim.DeviceGetHandleByUUID, Timeout: 2e9}
	for _, g := range n.inv.GPUs {
		w := *g
		w.Device = killDevice{g.Device, p.k}
		p.gpus = append(p.gpus, &w)
	}
	p.restart()
	return p
}

// publish is what the node offers now, as DeviceTable decides it: a lost
// GPU offers nothing; a GPU with dynamic MIG off offers itself whole and
// only the MIG devices that records hold.
func (p *prop) publish() map[string]*AllocatableDevice {
	held := map[string]bool{}
	heldVM, heldMig := map[string]bool{}, map[string]bool{}
	records, _ := checkpoint.ReadOnly(filepath.Join(p.n.dir, "checkpoint"))
	for _, r := range records {
		for _, d := range r.Devices {
			held[d.Device] = true
			if d.Vfio != nil {
				heldVM[d.UUID] = true
			}
			if d.Mig != nil && d.Mig.Dynamic {
				heldMig[d.Mig.ParentUUID] = true
			}
		}
	}
	out := map[string]*AllocatableDevice{}
	for i, g := range p.gpus {
		if p.lost[i] {
			continue
		}
		if p.static[i] {
			p.publishStatic(out, g, held)
			continue
		}
		// With the DynamicMIG gate off, a GPU stays dynamic while records
		// hold MIG devices of it, unless its node publishes them not.
		dynamic := !p.migOff[i] && !p.dynOff
		keepHeld := !p.dynOff || !p.heldHidden
		name := gpuName(g.Minor)
		out[name] = &AllocatableDevice{Name: name, Kind: configapi.WholeGPU, GPU: g, Partitionable: dynamic || (heldMig[g.UUID] && keepHeld && !p.migOff[i])}
		if !p.noMonitors || held[monitorName(g.Minor)] {
			out[monitorName(g.Minor)] = &AllocatableDevice{Name: monitorName(g.Minor), Kind: configapi.Monitor, GPU: g}
		}
		if !p.ptOff[i] && (!p.ptAllOff || heldVM[g.UUID]) {
			out[vfioName(g.Minor)] = &AllocatableDevice{Name: vfioName(g.Minor), Kind: configapi.VFIO, GPU: g, Partitionable: out[name].Partitionable}
		}
		for _, prof := range g.MigProfiles {
			for _, pl := range prof.Placements {
				name := migName(g.Minor, prof.Name, pl.Start)
				if (dynamic && (!p.fewProfiles || fewProfiles[prof.Name])) || (held[name] && keepHeld) {
					out[name] = &AllocatableDevice{Name: name, Kind: configapi.DynamicMIG, GPU: g, Placement: mig.Placement{Profile: prof, Start: pl.Start, Size: pl.Size}}
				}
			}
		}
	}
	return out
}

// restart starts a new plugin over the node, kills included: a start
// killed half-way is started again, as the kubelet does.
func (p *prop) restart() {
	for {
		p.n.devices = p.publish()
		p.n.restart()
		w, err := cdi.NewWriter(filepath.Join(p.n.dir, "cdi"), testDriver, killEdits{p.n.edits, p.k})
		if err != nil {
			p.t.Fatal(err)
		}
		p.n.cdi, p.n.state.CDI = w, w
		p.n.state.Sharing.TimeSlicer = killSlicer{p.n.sim, p.k}
		p.n.state.Sharing.Allowed[configapi.MpsStrategy] = !p.mpsOff
		p.n.state.Sharing.MPS = &sharing.MPS{Root: filepath.Join(p.n.dir, "mps"), Runner: p.mps, ReadyTimeout: 2e9}
		p.maybeArm()
		if !p.k.runWithin(p.t, startWatchdog, func() { p.n.state.RecoverLocal(p.t.Context()) }) {
			// Then, in the background: stale claims and unowned MPS
			// daemons (RemoveStale), and the claims' daemons started
			// again (the supervisor).
			if _, err := p.n.state.RemoveStale(p.t.Context(), p.getter()); err != nil {
				p.fail("remove stale: %v", err)
			}
			return
		}
		p.kills++
	}
}

func (p *prop) maybeArm() {
	if p.rng.IntN(3) == 0 {
		p.k.arm(1 + p.rng.IntN(8))
	}
}

func (p *prop) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("step %d: "+format, append([]any{p.step}, args...)...)
}

func (p *prop) randomStep() {
	ops := []struct {
		name   string
		weight int
		run    func()
	}{
		{"prepare", 30, p.prepareNew}, {"reprepare", 8, p.reprepare}, {"unprepare", 20, p.unprepareOne},
		{"restart", 8, p.restart}, {"reboot", 5, p.reboot}, {"lose-gpu", 3, p.toggleLost},
		{"mig-off-on", 4, p.toggleMig}, {"downgrade", 3, p.downgrade}, {"upgrade", 3, p.upgrade},
		{"passthrough-off-on", 3, p.togglePassthrough}, {"monitors-off-on", 2, p.toggleMonitors},
		{"mig-profiles", 2, p.toggleProfiles}, {"static-mig", 3, p.toggleStatic},
		{"driver-reload", 4, p.driverReload}, {"dynamic-mig-gate", 3, p.toggleDynamicMIGGate},
		{"passthrough-gate", 2, p.togglePassthroughGate}, {"mps-gate", 2, p.toggleMPSGate},
		{"fifo-in-cdi-dir", 1, p.fifoInCDIDir},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	r := p.rng.IntN(total)
	for _, o := range ops {
		if r < o.weight {
			p.ops[o.name]++
			o.run()
			return
		}
		r -= o.weight
	}
}

// held lists the non-admin devices live claims hold, as the scheduler
// counts them.
func (p *prop) conflicts(want *AllocatableDevice) bool {
	for _, lc := range p.live {
		for i, name := range lc.devices {
			if lc.c.Status.Allocation.Devices.Results[i].AdminAccess != nil {
				continue
			}
			if have := p.n.devices[name]; have != nil && devicesOverlap(have, want) {
				return true
			}
			if have := p.n.devices[name]; have == nil && p.lostOverlap(name, want) {
				return true
			}
		}
	}
	return false
}

// devicesOverlap is the scheduler's view of two published devices: one GPU
// used whole and any MIG device of it, or intersecting MIG placements. It
// is the test's own model, apart from the ledger's footprints.
func devicesOverlap(a, b *AllocatableDevice) bool {
	if a.GPU.UUID != b.GPU.UUID {
		return false
	}
	if !a.Kind.IsMIG() || !b.Kind.IsMIG() {
		return true
	}
	pa, pb := a.Placement, b.Placement
	return pa.Start < pb.Start+pb.Size && pb.Start < pa.Start+pa.Size
}

// instanceCapReached: the profile allows fewer instances than placements
// (1g.10gb+me: one per GPU, for its media engines) and live claims have
// them all; the published instance counter keeps the scheduler off.
func (p *prop) instanceCapReached(want *AllocatableDevice) bool {
	if !want.Kind.IsMIG() || int(want.Placement.Profile.Info.InstanceCount) >= len(want.Placement.Profile.Placements) {
		return false
	}
	used := 0
	for _, lc := range p.live {
		for _, name := range lc.devices {
			if have := p.n.devices[name]; have != nil && have.Kind.IsMIG() && have.GPU.UUID == want.GPU.UUID && have.Placement.Profile.Name == want.Placement.Profile.Name {
				used++
			}
		}
	}
	return used >= int(want.Placement.Profile.Info.InstanceCount)
}

// lostOverlap: a held device that is not published (its GPU is lost)
// still counts for the scheduler (the slices' counters are gone with the
// GPU, so nothing of that GPU is allocatable anyway).
func (p *prop) lostOverlap(name string, want *AllocatableDevice) bool {
	return want.GPU.Minor == minorOf(name)
}

func minorOf(name string) int {
	var m int
	if _, err := fmt.Sscanf(name, "gpu-%d", &m); err == nil {
		return m
	}
	if _, err := fmt.Sscanf(name, "mig-%d-", &m); err == nil {
		return m
	}
	return -1
}

func (p *prop) prepareNew() {
	var whole, migs, vms, monitors []string
	for name, d := range p.n.devices {
		switch d.Kind {
		case configapi.WholeGPU:
			whole = append(whole, name)
		case configapi.VFIO:
			vms = append(vms, name)
		case configapi.Monitor:
			monitors = append(monitors, name)
		default:
			migs = append(migs, name)
		}
	}
	slices.Sort(whole)
	slices.Sort(migs)
	slices.Sort(vms)
	slices.Sort(monitors)
	if p.rng.IntN(4) == 0 {
		p.prepareShared(whole, migs)
		return
	}
	if p.rng.IntN(4) == 0 && len(vms)+len(monitors) > 0 {
		p.prepareVMOrMonitor(append(vms, monitors...))
		return
	}
	p.next++
	uid := types.UID(fmt.Sprintf("uid-%d", p.next))
	var results []result
	var chosen []*AllocatableDevice
	timeSliced := false
	for i := range 1 + p.rng.IntN(2) { // one or two devices
		var name string
		admin := false
		switch {
		case len(whole) > 0 && (len(migs) == 0 || p.rng.IntN(3) == 0):
			name, admin = whole[p.rng.IntN(len(whole))], p.rng.IntN(4) == 0
		case len(migs) > 0:
			name = migs[p.rng.IntN(len(migs))]
		default:
			return // every GPU lost
		}
		d := p.n.devices[name]
		if !admin && (p.conflicts(d) || p.instanceCapReached(d)) {
			return // the scheduler would not allocate it
		}
		if admin && p.vmConflict(d, true) {
			return // refused at prepare: prepareVMOrMonitor covers that
		}
		for _, c := range chosen {
			if c.Name == name || (!admin && devicesOverlap(c, d)) {
				return
			}
			if d.Kind.IsMIG() && c.Kind.IsMIG() && c.GPU == d.GPU && c.Placement.Profile.Name == d.Placement.Profile.Name && int(d.Placement.Profile.Info.InstanceCount) < len(d.Placement.Profile.Placements) {
				return // keep it simple: one capped profile per GPU and claim
			}
		}
		timeSliced = timeSliced || (d.Kind == configapi.WholeGPU && !admin && p.rng.IntN(2) == 0)
		req := fmt.Sprintf("r%d", i)
		results = append(results, result{request: req, device: name, admin: admin})
		chosen = append(chosen, d)
	}
	for _, d := range chosen {
		if d.Kind == configapi.MIG {
			p.ops["static-claim"]++
		}
	}
	c := claim(uid, results...)
	for _, r := range results {
		if d := p.n.devices[r.device]; timeSliced && d.Kind == configapi.WholeGPU && !r.admin {
			c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, opaque(resourceapi.AllocationConfigSourceClaim, testDriver, []string{r.request}, timeSlice("Long")))
		}
	}
	lc := &liveClaim{c: c, held: chosen}
	for _, r := range results {
		lc.devices = append(lc.devices, r.device)
	}
	p.live[uid] = lc
	p.prepareLive(lc, true)
}

// prepareLive is the kubelet's prepare of a live claim: killed, it is
// retried after the plugin restarts, and then it must succeed.
func (p *prop) prepareLive(lc *liveClaim, mayKill bool) {
	var err error
	if mayKill {
		p.maybeArm()
	}
	if p.k.run(func() { _, err = p.n.state.Prepare(p.t.Context(), lc.c) }) {
		p.kills++
		p.restart()
		p.prepareLive(lc, false)
		return
	}
	if err == nil || p.mayFail(lc) {
		return
	}
	if others := p.heldByOthers(lc); len(others) > 0 {
		// The scheduler allocated, by name, hardware that a claim whose
		// device was renamed by a reboot still owns: refused, and the
		// kubelet unprepares the claim, whose pod never starts.
		named := false
		for _, o := range others {
			named = named || strings.Contains(err.Error(), "for claim "+string(o.c.UID))
		}
		if !named {
			p.fail("prepare %s on %v, whose hardware other claims hold: refused for another reason: %v", lc.c.UID, lc.devices, err)
		}
		p.ops["refused: renamed claim's hardware"]++
		if err := p.n.state.Unprepare(p.t.Context(), ref(lc.c)); err != nil {
			p.fail("unprepare %s: %v", lc.c.UID, err)
		}
		delete(p.live, lc.c.UID)
		return
	}
	for _, name := range lc.devices {
		if p.n.devices[name] == nil {
			// Its prepare was killed and rolled back, and then the node
			// stopped offering the device (a chart value): the pod
			// cannot start, and the kubelet unprepares the claim.
			if err := p.n.state.Unprepare(p.t.Context(), ref(lc.c)); err != nil {
				p.fail("unprepare %s: %v", lc.c.UID, err)
			}
			delete(p.live, lc.c.UID)
			return
		}
	}
	p.fail("prepare %s on %v: %v", lc.c.UID, lc.devices, err)
}

// mayFail: a claim whose record a newer driver wrote is refused; one whose
// GPU is lost cannot be restored. Every other claim is restored on its own
// hardware, found by identity, whatever its device's name means now
// (minors renumbered at a reboot or a driver reload) and whether the node
// publishes it (a gate or chart value turned off): issue 47.
func (p *prop) mayFail(lc *liveClaim) bool {
	if lc.newer != nil {
		return true
	}
	for _, held := range lc.held {
		if p.lost[p.gpuIndex(held.GPU.UUID)] {
			return true
		}
	}
	return false
}

func (p *prop) pick(pred func(*liveClaim) bool) *liveClaim {
	var uids []types.UID
	for uid, lc := range p.live {
		if pred(lc) {
			uids = append(uids, uid)
		}
	}
	if len(uids) == 0 {
		return nil
	}
	slices.Sort(uids)
	return p.live[uids[p.rng.IntN(len(uids))]]
}

func (p *prop) reprepare() {
	if lc := p.pick(func(*liveClaim) bool { return true }); lc != nil {
		p.prepareLive(lc, true)
	}
}

func (p *prop) unprepareOne() {
	lc := p.pick(func(lc *liveClaim) bool { return lc.newer == nil })
	if lc == nil {
		return
	}
	p.maybeArm()
	var err error
	if p.k.run(func() { err = p.n.state.Unprepare(p.t.Context(), ref(lc.c)) }) {
		p.kills++
		p.restart()
		err = p.n.state.Unprepare(p.t.Context(), ref(lc.c))
	}
	if err != nil {
		p.fail("unprepare %s: %v", lc.c.UID, err)
	}
	delete(p.live, lc.c.UID)
}

func (p *prop) reboot() {
	if err := p.n.sim.Reboot(); err != nil {
		p.t.Fatal(err)
	}
	p.mps.reboot()
	p.staticLayoutsAtBoot()
	if p.rng.IntN(2) == 0 {
		p.ops["renumbered"]++
		p.renumberBuses()
	}
	if p.rng.IntN(3) == 0 {
		p.ops["minors renumbered"]++
		p.renumberMinors()
	}
	entries, _ := os.ReadDir(filepath.Join(p.n.dir, "cdi"))
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(p.n.dir, "cdi", e.Name()))
	}
	for _, lc := range p.live {
		if lc.newer != nil {
			lc.rebooted = true
		}
	}
	p.restart()
}

func (p *prop) toggleLost() {
	m := p.rng.IntN(len(p.gpus))
	p.lost[m] = !p.lost[m]
	p.restart()
}

func (p *prop) toggleMig() {
	m := p.rng.IntN(len(p.gpus))
	p.migOff[m] = !p.migOff[m]
	p.restart()
}

func (p *prop) recordPath(uid types.UID) string {
	return filepath.Join(p.n.dir, "checkpoint", string(uid)+".json")
}

// downgrade: a newer driver prepared the claim (its record is of a newer
// format), and the node went back to this one.
func (p *prop) downgrade() {
	lc := p.pick(func(lc *liveClaim) bool { return lc.newer == nil })
	if lc == nil {
		return
	}
	old, err := os.ReadFile(p.recordPath(lc.c.UID))
	if err != nil {
		p.fail("read record of live claim %s: %v", lc.c.UID, err)
	}
	var f struct {
		Claim json.RawMessage `json:"claim"`
	}
	if err := json.Unmarshal(old, &f); err != nil {
		p.t.Fatal(err)
	}
	payload := append(append([]byte{}, f.Claim[:len(f.Claim)-1]...), []byte(`,"leaseEpoch":3}`)...)
	data, _ := json.Marshal(map[string]any{"version": "gpu.nvidia.com/checkpoint/v4", "checksum": crc32.ChecksumIEEE(payload), "claim": json.RawMessage(payload)})
	if err := os.WriteFile(p.recordPath(lc.c.UID), data, 0o600); err != nil {
		p.t.Fatal(err)
	}
	_, err = os.Stat(p.n.cdi.SpecPath(lc.c.UID))
	lc.newer, lc.rebooted, lc.hadSpec = old, false, err == nil
	p.restart()
}

// upgrade: the newer driver is back, finds its claims and (for this
// test) writes them in this format again.
func (p *prop) upgrade() {
	any := false
	for _, lc := range p.live {
		if lc.newer == nil {
			continue
		}
		if err := os.WriteFile(p.recordPath(lc.c.UID), lc.newer, 0o600); err != nil {
			p.t.Fatal(err)
		}
		lc.newer, lc.rebooted, any = nil, false, true
	}
	if any {
		p.restart()
	}
}

// check asserts the invariants.
func (p *prop) check() {
	p.t.Helper()
	owned := map[ledger.MigKey]types.UID{}
	records, opaque := p.n.store.Owning()
	if opaque {
		p.fail("a newer record could not be read")
	}
	for _, rec := range records {
		lc := p.live[rec.UID]
		if lc == nil {
			p.fail("record of claim %s that is not live: %+v", rec.UID, rec)
		}
		if lc.newer != nil && lc.rebooted {
			continue // its MIG devices went with the reboot; the newer driver restores them
		}
		for _, d := range rec.Devices {
			if d.Mig == nil || d.Mig.GIID < 0 {
				continue
			}
			key := ledger.MigKey{Parent: d.Mig.ParentUUID, GIID: d.Mig.GIID}
			if other, dup := owned[key]; dup {
				p.fail("claims %s and %s both own GPU instance %d of %s", other, rec.UID, d.Mig.GIID, d.Mig.ParentUUID)
			}
			owned[key] = rec.UID
		}
	}
	unrestored := map[types.UID]bool{}
	for _, e := range p.n.state.Unrestored() {
		unrestored[e.UID] = true
	}
	for uid, lc := range p.live {
		if unrestored[uid] {
			if !p.mayFail(lc) {
				p.fail("claim %s on %v is not restored: %v", uid, lc.devices, p.n.state.Ledger.UnrestoredErr(uid))
			}
			continue
		}
		rec, ok := p.n.store.Get(uid)
		if lc.newer != nil {
			if lc.rebooted {
				continue
			}
			if _, err := os.Stat(p.n.cdi.SpecPath(uid)); err != nil && lc.hadSpec {
				p.fail("the newer claim %s lost its CDI spec: %v", uid, err)
			}
			for _, d := range lc.newerRecord(p.t).Devices {
				if d.Mig != nil && d.Mig.Dynamic && d.Mig.GIID >= 0 && !p.lost[p.gpuIndex(d.Mig.ParentUUID)] && !p.migPresent(d) {
					p.fail("the newer claim %s lost its MIG device %s", uid, d.Device)
				}
			}
			continue
		}
		if !ok || !rec.Prepared() {
			p.fail("live claim %s has no prepared record: %+v", uid, rec)
		}
		if rec.State == checkpoint.RestorePending {
			continue // waits for its GPU (lost), listed as unrestored at start
		}
		if !p.n.state.specIntact(uid) {
			p.fail("live claim %s lost its CDI spec", uid)
		}
		p.checkOwnHardware(lc, rec)
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.Dynamic && !p.lost[p.gpuIndex(d.Mig.ParentUUID)] && !p.migPresent(d) {
				p.fail("live claim %s lost its MIG device %s (%s at %d, GI %d)", uid, d.Device, d.Mig.Profile, d.Mig.Start, d.Mig.GIID)
			}
		}
	}
	specs, _ := p.n.cdi.List()
	for _, s := range specs {
		if p.live[s.UID] == nil {
			p.fail("CDI spec of claim %s that is not live", s.UID)
		}
	}
	p.checkBindings(records)
	p.checkDaemons(records, unrestored)
	p.checkNoSharedHardware()
}

func (p *prop) migPresent(d checkpoint.PreparedDevice) bool {
	for _, g := range p.n.inv.GPUs {
		if g.UUID != d.Mig.ParentUUID {
			continue
		}
		existing, err := nvdev.ExistingMigDevices(g.Device, g.MigProfiles)
		if err != nil {
			return false
		}
		for _, m := range existing {
			if m.GIID == d.Mig.GIID && m.Placement.Start == d.Mig.Start && m.Profile.Name == d.Mig.Profile {
				return true
			}
		}
	}
	return false
}

// finish brings every GPU back, upgrades, unprepares every claim and
// checks that nothing is left.
func (p *prop) finish() {
	p.step = -1
	clear(p.lost)
	clear(p.migOff)
	clear(p.ptOff)
	p.noMonitors, p.fewProfiles = false, false
	p.dynOff, p.heldHidden, p.ptAllOff, p.mpsOff = false, false, false, false
	p.upgrade()
	p.restart()
	for uid, lc := range p.live {
		if err := p.n.state.Unprepare(p.t.Context(), ref(lc.c)); err != nil {
			p.fail("final unprepare of %s: %v", uid, err)
		}
		delete(p.live, uid)
	}
	p.removeStaticLayouts()
	// Nothing may be left for the next start to clean up.
	for _, g := range p.n.inv.GPUs {
		if got := p.n.sim.MigInstanceCount(g.UUID); got != 0 {
			p.fail("GPU %d has %d MIG devices left after every claim was unprepared", g.Minor, got)
		}
	}
	p.restart()
	if recs := p.n.store.List(); len(recs) != 0 {
		p.fail("records left: %+v", recs)
	}
	if specs, _ := p.n.cdi.List(); len(specs) != 0 {
		p.fail("%d CDI specs left", len(specs))
	}
	for _, g := range p.n.inv.GPUs {
		if got := p.n.sim.MigInstanceCount(g.UUID); got != 0 {
			p.fail("GPU %d has %d MIG devices left", g.Minor, got)
		}
		if got := p.n.sim.TimeSlice(g.UUID); got != string(configapi.DefaultTimeSlice) {
			p.fail("GPU %d time slice %s left", g.Minor, got)
		}
		if current, _, ret := g.Device.GetMigMode(); ret != nvml.SUCCESS || current != nvml.DEVICE_MIG_DISABLE {
			p.fail("GPU %d left in MIG mode %d (%v)", g.Minor, current, ret)
		}
		if p.mps.count() != 0 {
			p.fail("MPS daemons left: %v", p.mps.names())
		}
		if bound := p.n.sim.BoundDriver(g.PCIBusID); bound != vfio.DriverNvidia {
			p.fail("GPU %d left bound to %q", g.Minor, bound)
		}
	}
}

// newerRecord is what the newer driver's record of the claim says.
func (lc *liveClaim) newerRecord(t *testing.T) checkpoint.PreparedClaim {
	var f struct {
		Claim checkpoint.PreparedClaim `json:"claim"`
	}
	if err := json.Unmarshal(lc.newer, &f); err != nil {
		t.Fatal(err)
	}
	return f.Claim
}
