// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// device is one published device of a complete pool.
type device struct {
	Driver, Pool, Node string
	Dev                *resourceapi.Device
}

func (d *device) key() string { return d.Driver + "/" + d.Pool + "/" + d.Dev.Name }

// attr returns a device attribute by name, qualified with the driver's
// domain when the name has none (as CEL and matchAttribute do).
func (d *device) attr(name string) (resourceapi.DeviceAttribute, bool) {
	if a, ok := d.Dev.Attributes[resourceapi.QualifiedName(name)]; ok {
		return a, true
	}
	if domain, id, ok := strings.Cut(name, "/"); ok && domain == d.Driver {
		a, ok := d.Dev.Attributes[resourceapi.QualifiedName(id)]
		return a, ok
	}
	return resourceapi.DeviceAttribute{}, false
}

func (d *device) typ() string {
	if a, ok := d.attr("type"); ok && a.StringValue != nil {
		return *a.StringValue
	}
	return ""
}

// holder is a claim that holds an allocated device.
type holder struct {
	Claim    string // namespace/name
	Pods     []string
	Request  string
	Shared   bool
	Consumed map[resourceapi.QualifiedName]resource.Quantity
}

// pool is one driver's pool as its slices announce it.
type pool struct {
	Driver, Name, Node string
	Generation         int64
	Announced, Seen    int
	Complete           bool
}

// cluster indexes a snapshot's devices, pools, allocations and counters.
type cluster struct {
	snap     *Snapshot
	pools    []*pool
	devices  []*device
	byKey    map[string]*device
	holders  map[string][]holder              // device key -> claims holding it
	counters map[string]map[string]counterUse // driver/pool/set -> counter -> use
}

type counterUse struct {
	Total    resource.Quantity
	Consumed resource.Quantity
	By       []string // device keys consuming it
}

func index(s *Snapshot, exceptClaimUID string) *cluster {
	c := &cluster{snap: s, byKey: map[string]*device{}, holders: map[string][]holder{}, counters: map[string]map[string]counterUse{}}
	byPool := map[string][]*resourceapi.ResourceSlice{}
	for i := range s.Slices {
		sl := &s.Slices[i]
		k := sl.Spec.Driver + "/" + sl.Spec.Pool.Name
		byPool[k] = append(byPool[k], sl)
	}
	keys := make([]string, 0, len(byPool))
	for k := range byPool {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		slices := byPool[k]
		p := &pool{Driver: slices[0].Spec.Driver, Name: slices[0].Spec.Pool.Name}
		for _, sl := range slices {
			p.Generation = max(p.Generation, sl.Spec.Pool.Generation)
		}
		var current []*resourceapi.ResourceSlice
		for _, sl := range slices {
			if sl.Spec.Pool.Generation == p.Generation {
				current = append(current, sl)
				p.Announced = int(sl.Spec.Pool.ResourceSliceCount)
				if sl.Spec.NodeName != nil {
					p.Node = *sl.Spec.NodeName
				}
			}
		}
		p.Seen = len(current)
		p.Complete = p.Seen == p.Announced
		c.pools = append(c.pools, p)
		if !p.Complete {
			continue // the scheduler ignores incomplete pools too
		}
		for _, sl := range current {
			for _, cs := range sl.Spec.SharedCounters {
				m := map[string]counterUse{}
				for name, v := range cs.Counters {
					m[name] = counterUse{Total: v.Value}
				}
				c.counters[k+"/"+cs.Name] = m
			}
			for j := range sl.Spec.Devices {
				d := &device{Driver: p.Driver, Pool: p.Name, Node: p.Node, Dev: &sl.Spec.Devices[j]}
				c.devices = append(c.devices, d)
				c.byKey[d.key()] = d
			}
		}
	}
	for i := range s.Claims {
		cl := &s.Claims[i]
		if cl.Status.Allocation == nil || string(cl.UID) == exceptClaimUID && exceptClaimUID != "" {
			continue
		}
		var pods []string
		for _, r := range cl.Status.ReservedFor {
			if r.Resource == "pods" {
				pods = append(pods, cl.Namespace+"/"+r.Name)
			}
		}
		for _, r := range cl.Status.Allocation.Devices.Results {
			k := r.Driver + "/" + r.Pool + "/" + r.Device
			c.holders[k] = append(c.holders[k], holder{Claim: cl.Namespace + "/" + cl.Name, Pods: pods, Request: r.Request, Shared: r.ShareID != nil, Consumed: r.ConsumedCapacity})
			if d := c.byKey[k]; d != nil {
				c.consume(d)
			}
		}
	}
	return c
}

// consume books an allocated device's counters.
func (c *cluster) consume(d *device) {
	for _, cc := range d.Dev.ConsumesCounters {
		set := c.counters[d.Driver+"/"+d.Pool+"/"+cc.CounterSet]
		if set == nil {
			continue
		}
		for name, v := range cc.Counters {
			u := set[name]
			u.Consumed.Add(v.Value)
			u.By = append(u.By, d.key())
			set[name] = u
		}
	}
}

// counterBlockers returns the allocated devices whose counters leave too
// little for a device (empty when it fits). A MIG placement overlapping an
// allocated one, or any placement of a GPU allocated whole, is blocked this
// way; so is, for an admin-access request, an allocated device itself,
// whose own counters are among those consumed.
func (c *cluster) counterBlockers(d *device) (blockers []string, set string) {
	seen := map[string]bool{}
	for _, cc := range d.Dev.ConsumesCounters {
		use := c.counters[d.Driver+"/"+d.Pool+"/"+cc.CounterSet]
		if use == nil {
			continue
		}
		for name, need := range cc.Counters {
			u := use[name]
			left := u.Total.DeepCopy()
			left.Sub(u.Consumed)
			if left.Cmp(need.Value) >= 0 {
				continue
			}
			set = cc.CounterSet
			for _, b := range u.By {
				if !seen[b] {
					seen[b] = true
					blockers = append(blockers, b)
				}
			}
		}
	}
	sort.Strings(blockers)
	return blockers, set
}

// capacityLeft returns what is left of a shareable device's capacity
// after the shares allocated from it.
func (c *cluster) capacityLeft(d *device, name resourceapi.QualifiedName) (resource.Quantity, bool) {
	capa, ok := d.Dev.Capacity[name]
	if !ok {
		return resource.Quantity{}, false
	}
	left := capa.Value.DeepCopy()
	for _, h := range c.holders[d.key()] {
		if q, ok := h.Consumed[name]; ok {
			left.Sub(q)
		}
	}
	return left, true
}

func (c *cluster) incompletePools() []string {
	var out []string
	for _, p := range c.pools {
		if !p.Complete {
			out = append(out, fmt.Sprintf("pool %s of %s (node %s) has %d of %d slices at generation %d", p.Name, p.Driver, orNone(p.Node), p.Seen, p.Announced, p.Generation))
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
