// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The allocator (1.37's and 1.38's alike) accounts shared counters from the
// devices it finds in the current ResourceSlices
// (kubernetes/kubernetes#140802): an allocated
// device that a republished pool no longer lists, lists twice, or lists
// with other consumesCounters, or a counter set whose capacity changed,
// lets the scheduler over-commit that GPU. The helpers below read the pool
// as the scheduler would and compare it with what the devices consumed
// when they were allocated.

// poolSnapshot is the node's pool as published at one moment.
type poolSnapshot struct {
	devices  map[string][]resourceapi.Device     // by name: every copy published
	counters map[string][]resourceapi.CounterSet // by counter set name
	slices   int
}

// heldDevice is what a device consumed, and what its counter sets held,
// when the scheduler allocated it.
type heldDevice struct {
	claim    string
	consumes string            // canonical consumesCounters
	sets     map[string]string // counter set name -> canonical counters
}

func canonicalCounters(c map[string]resourceapi.Counter) string {
	var parts []string
	for name, v := range c {
		parts = append(parts, name+"="+v.Value.AsDec().String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func canonicalConsumes(d resourceapi.Device) string {
	var parts []string
	for _, c := range d.ConsumesCounters {
		parts = append(parts, c.CounterSet+"{"+canonicalCounters(c.Counters)+"}")
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// currentPool waits until the node's pool is complete (every slice of one
// generation, as many as ResourceSliceCount says), satisfies ready, and
// has not changed for a while (the resourceslice controller has finished
// republishing), and returns it.
func (n *node) currentPool(what string, ready func(poolSnapshot) bool) poolSnapshot {
	n.t.Helper()
	read := func() (poolSnapshot, string, bool) {
		list, err := n.client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			n.t.Fatal(err)
		}
		var mine []resourceapi.ResourceSlice
		for _, s := range list.Items {
			if s.Spec.Driver == testDriver && s.Spec.Pool.Name == testNode {
				mine = append(mine, s)
			}
		}
		if len(mine) == 0 || int64(len(mine)) != mine[0].Spec.Pool.ResourceSliceCount {
			return poolSnapshot{}, "", false
		}
		snap := poolSnapshot{devices: map[string][]resourceapi.Device{}, counters: map[string][]resourceapi.CounterSet{}, slices: len(mine)}
		var specs []string
		for _, s := range mine {
			if s.Spec.Pool.Generation != mine[0].Spec.Pool.Generation {
				return poolSnapshot{}, "", false
			}
			for _, d := range s.Spec.Devices {
				snap.devices[d.Name] = append(snap.devices[d.Name], d)
			}
			for _, c := range s.Spec.SharedCounters {
				snap.counters[c.Name] = append(snap.counters[c.Name], c)
			}
			data, _ := json.Marshal(s.Spec)
			specs = append(specs, string(data))
		}
		sort.Strings(specs)
		return snap, strings.Join(specs, "\n"), true
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		snap, key, ok := read()
		if !ok || !ready(snap) {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		time.Sleep(300 * time.Millisecond)
		if _, again, ok := read(); ok && again == key {
			return snap
		}
	}
	n.t.Fatalf("%s: the pool was not published completely and stably within 30s", what)
	return poolSnapshot{}
}

// allocate records what the named devices consume in the current pool, as
// the scheduler sees them when it allocates them, and creates the claim.
func (n *node) allocate(held map[string]heldDevice, name string, devices ...string) *resourceapi.ResourceClaim {
	n.t.Helper()
	snap := n.currentPool("allocate "+name, func(poolSnapshot) bool { return true })
	for _, dev := range devices {
		copies := snap.devices[dev]
		if len(copies) != 1 || len(copies[0].Taints) > 0 || len(copies[0].ConsumesCounters) == 0 {
			n.t.Fatalf("allocate %s: device %s published %d times (%+v); the scheduler would not allocate it", name, dev, len(copies), copies)
		}
		h := heldDevice{claim: name, consumes: canonicalConsumes(copies[0]), sets: map[string]string{}}
		for _, c := range copies[0].ConsumesCounters {
			sets := snap.counters[c.CounterSet]
			if len(sets) != 1 {
				n.t.Fatalf("allocate %s: counter set %s published %d times", name, c.CounterSet, len(sets))
			}
			h.sets[c.CounterSet] = canonicalCounters(sets[0].Counters)
		}
		held[dev] = h
	}
	if err := fitsCounters(snap, held); err != nil {
		n.t.Fatalf("allocate %s: the test's own allocation over-commits: %v", name, err)
	}
	return n.claim(name, devices)
}

// fitsCounters checks that the held devices together consume no more of a
// counter set than it has, by the published numbers.
func fitsCounters(snap poolSnapshot, held map[string]heldDevice) error {
	for setName, sets := range snap.counters {
		for counter, capacity := range sets[0].Counters {
			used := capacity.Value
			used.Set(0)
			for dev := range held {
				for _, d := range snap.devices[dev] {
					for _, c := range d.ConsumesCounters {
						if v, ok := c.Counters[counter]; ok && c.CounterSet == setName {
							used.Add(v.Value)
						}
					}
				}
			}
			if used.Cmp(capacity.Value) > 0 {
				return fmt.Errorf("counter %s/%s: held devices consume %s of %s", setName, counter, used.String(), capacity.Value.String())
			}
		}
	}
	return nil
}

// counterViolations lists every way the pool breaks the invariant for the
// held devices: each is published exactly once, consuming what it consumed
// when allocated, and each counter set it draws on is published exactly
// once with the capacity it had then.
func counterViolations(snap poolSnapshot, held map[string]heldDevice) []string {
	var out []string
	names := make([]string, 0, len(held))
	for dev := range held {
		names = append(names, dev)
	}
	sort.Strings(names)
	for _, dev := range names {
		h := held[dev]
		copies := snap.devices[dev]
		if len(copies) != 1 {
			out = append(out, fmt.Sprintf("device %s (claim %s) published %d times, want once", dev, h.claim, len(copies)))
		}
		for _, d := range copies {
			if got := canonicalConsumes(d); got != h.consumes {
				out = append(out, fmt.Sprintf("device %s (claim %s) consumesCounters changed:\n  allocated: %s\n  now:       %s", dev, h.claim, h.consumes, got))
			}
		}
		for setName, want := range h.sets {
			sets := snap.counters[setName]
			if len(sets) != 1 {
				out = append(out, fmt.Sprintf("counter set %s (of device %s) published %d times, want once", setName, dev, len(sets)))
			}
			for _, s := range sets {
				if got := canonicalCounters(s.Counters); got != want {
					out = append(out, fmt.Sprintf("counter set %s (of device %s) changed:\n  allocated: %s\n  now:       %s", setName, dev, want, got))
				}
			}
		}
	}
	if err := fitsCounters(snap, held); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// TestCountersOfPreparedDevicesNeverChange (issue 21, point 4) drives a
// dynamic-MIG node through MIG create and destroy, a GPU fault and its
// recovery, plugin restarts (one while the GPU is still faulty) and a
// reboot, and after every step checks the counter invariant for every
// device a prepared claim holds.
func TestCountersOfPreparedDevicesNeverChange(t *testing.T) {
	const profile = "h100x4"
	n := newNodeWith(t, profile, true)
	n.health = HealthConfig{TaintEffect: resourceapi.DeviceTaintEffectNoSchedule, PollInterval: 50 * time.Millisecond}
	n.restart(profile)

	held := map[string]heldDevice{}
	steps := 0
	check := func(step string, ready func(poolSnapshot) bool) poolSnapshot {
		t.Helper()
		steps++
		// The plugin serving this step has published (a restarted one
		// included), so the pool read next is its own.
		waitFor(t, "plugin ready after "+step, func() bool { return n.driver.Ready() == nil })
		snap := n.currentPool(step, ready)
		tainted := 0
		for _, copies := range snap.devices {
			for _, d := range copies {
				if len(d.Taints) > 0 {
					tainted++
				}
			}
		}
		t.Logf("%-45s %d slices, %d devices (%d tainted), %d counter sets", step+":", snap.slices, len(snap.devices), tainted, len(snap.counters))
		for _, v := range counterViolations(snap, held) {
			t.Errorf("after step %q: %s", step, v)
		}
		return snap
	}
	always := func(poolSnapshot) bool { return true }
	taintedNow := func(dev string, want bool) func(poolSnapshot) bool {
		return func(s poolSnapshot) bool {
			for _, d := range s.devices[dev] {
				if (len(d.Taints) > 0) == want {
					return true
				}
			}
			return false
		}
	}
	gpuUUID := func(i int) string { return n.driver.cfg.Backend.Inventory.GPUs[i].UUID }
	instances := func(i int) int { return n.driver.cfg.Backend.Simulator.MigInstanceCount(gpuUUID(i)) }
	wantInstances := func(step string, counts ...int) {
		t.Helper()
		for i, want := range counts {
			if got := instances(i); got != want {
				t.Fatalf("after step %q: GPU %d has %d MIG devices, want %d", step, i, got, want)
			}
		}
	}

	baseline := check("start", always)
	// The checker must see a violation where there is one: the whole GPU
	// that "whole" will hold, dropped, duplicated or consuming less, or its
	// counter set gone or smaller.
	probe := map[string]heldDevice{"gpu-0": {claim: "probe", consumes: canonicalConsumes(baseline.devices["gpu-0"][0]), sets: map[string]string{"gpu-0-counters": canonicalCounters(baseline.counters["gpu-0-counters"][0].Counters)}}}
	if v := counterViolations(baseline, probe); len(v) != 0 {
		t.Fatalf("checker: unchanged pool reported %v", v)
	}
	for what, mutate := range map[string]func(poolSnapshot) poolSnapshot{
		"dropped": func(s poolSnapshot) poolSnapshot { delete(s.devices, "gpu-0"); return s },
		"duplicated": func(s poolSnapshot) poolSnapshot {
			s.devices["gpu-0"] = append(s.devices["gpu-0"], s.devices["gpu-0"][0])
			return s
		},
		"consumes less": func(s poolSnapshot) poolSnapshot {
			d := s.devices["gpu-0"][0].DeepCopy()
			delete(d.ConsumesCounters[0].Counters, "memory-slice-0")
			s.devices["gpu-0"] = []resourceapi.Device{*d}
			return s
		},
		"counter set gone": func(s poolSnapshot) poolSnapshot { delete(s.counters, "gpu-0-counters"); return s },
		"counter set shrunk": func(s poolSnapshot) poolSnapshot {
			c := s.counters["gpu-0-counters"][0].DeepCopy()
			c.Counters["memory-slice-7"] = resourceapi.Counter{Value: resource.MustParse("0")}
			s.counters["gpu-0-counters"] = []resourceapi.CounterSet{*c}
			return s
		},
	} {
		s := poolSnapshot{devices: cloneIndex(baseline.devices), counters: cloneIndex(baseline.counters)}
		if v := counterViolations(mutate(s), probe); len(v) == 0 {
			t.Fatalf("checker: a pool where gpu-0 is %s passed", what)
		}
	}

	// A whole GPU, two dynamic MIG devices on GPU 1, one on GPU 2.
	whole := n.allocate(held, "whole", "gpu-0")
	n.mustPrepare(whole)
	check("prepare whole GPU gpu-0", always)
	pair := n.allocate(held, "pair", "gpu-1-mig-3g40gb-9-4", "gpu-1-mig-2g20gb-14-0")
	n.mustPrepare(pair)
	wantInstances("prepare two MIG devices on GPU 1", 0, 2, 0, 0)
	check("prepare two MIG devices on GPU 1", always)
	sick := n.allocate(held, "sick", "gpu-2-mig-1g10gb-19-0")
	n.mustPrepare(sick)
	wantInstances("prepare a MIG device on GPU 2", 0, 2, 1, 0)
	check("prepare a MIG device on GPU 2", always)

	// Dynamic MIG create and destroy beside the held devices.
	carve := n.allocate(held, "carve", "gpu-1-mig-1g10gb-19-2")
	n.mustPrepare(carve)
	wantInstances("MIG create", 0, 3, 1, 0)
	check("MIG create (prepare gpu-1-mig-1g10gb-19-2)", always)
	n.unprepare(carve)
	delete(held, "gpu-1-mig-1g10gb-19-2")
	wantInstances("MIG destroy", 0, 2, 1, 0)
	check("MIG destroy (unprepare gpu-1-mig-1g10gb-19-2)", always)

	// A fault on GPU 2 taints it and all its MIG devices, the held one too.
	sim := n.driver.cfg.Backend.Simulator
	if err := sim.SetXIDFault(gpuUUID(2), "79"); err != nil {
		t.Fatal(err)
	}
	tainted := check("XID 79 on GPU 2", taintedNow("gpu-2-mig-1g10gb-19-0", true))
	if len(tainted.devices["gpu-2"]) != 1 || len(tainted.devices["gpu-2"][0].Taints) == 0 {
		t.Fatalf("XID 79 on GPU 2 did not taint gpu-2: %+v", tainted.devices["gpu-2"])
	}

	// A restart while the fault is pending: the taint comes back from the
	// recovery action (NVML does not repeat the event).
	// Waiting for that taint's own value makes sure the pool read is the
	// restarted plugin's, not the one published before.
	n.restart(profile)
	check("plugin restart while GPU 2 is faulty", func(s poolSnapshot) bool {
		for _, d := range s.devices["gpu-2-mig-1g10gb-19-0"] {
			for _, taint := range d.Taints {
				if taint.Value == "recovery-pending" {
					return true
				}
			}
		}
		return false
	})

	// Recovery: the reset clears the fault and the taint.
	if err := n.driver.cfg.Backend.Simulator.SetXIDFault(gpuUUID(2), ""); err != nil {
		t.Fatal(err)
	}
	check("GPU 2 recovers", taintedNow("gpu-2-mig-1g10gb-19-0", false))

	n.restart(profile)
	wantInstances("plugin restart", 0, 2, 1, 0)
	check("plugin restart", always)

	// A reboot takes away the MIG devices; start restores them.
	n.stop()
	rebootNode(t, n, profile)
	n.start(profile)
	wantInstances("node reboot", 0, 2, 1, 0)
	check("node reboot and plugin start", always)

	// The claims are still the plugin's after all of it.
	for _, c := range []string{"whole", "pair", "sick"} {
		n.mustPrepare(n.claimObj(c))
	}
	t.Logf("checked %d held devices after each of %d steps", len(held), steps)
}

// cloneIndex copies a snapshot's index so that a probe can change it.
func cloneIndex[T any](m map[string][]T) map[string][]T {
	out := make(map[string][]T, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
