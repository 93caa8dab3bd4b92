// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"
	"sort"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
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
	if a, ok := d.attr(deviceattr.AttrType); ok && a.StringValue != nil {
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

// Pool is one driver's pool as its slices announce it.
type Pool struct {
	Driver, Name, Node string
	Generation         int64
	Announced, Seen    int
	Complete           bool
}

// cluster is what a snapshot publishes and who holds what, read once per
// diagnosis: devices of complete pools, pools, and the claims holding
// each device. Whether a device can be had is the allocator's question
// (fit.go), not this index's.
type cluster struct {
	snap       *Snapshot
	pools      []*Pool
	devices    []*device
	byKey      map[string]*device
	holders    map[string][]holder                     // device key -> claims holding it
	poolSlices map[string][]*resourceapi.ResourceSlice // driver/pool -> its current slices, complete pools only
	// devs are the devices' selector form, converted once per slice.
	devs *allocator.Devices
	// allocated is every allocation but the claim's under diagnosis,
	// booked as the scheduler books them.
	allocated *allocator.State
}

// published reads a snapshot's pools, devices and holders; the claim
// with exceptClaimUID (the one diagnosed) counts as not allocated.
func published(s *Snapshot, exceptClaimUID string) *cluster {
	c := &cluster{snap: s, byKey: map[string]*device{}, holders: map[string][]holder{}, poolSlices: map[string][]*resourceapi.ResourceSlice{},
		allocated: allocator.NewState()}
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
		p := &Pool{Driver: slices[0].Spec.Driver, Name: slices[0].Spec.Pool.Name}
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
		c.poolSlices[k] = current
		for _, sl := range current {
			for j := range sl.Spec.Devices {
				d := &device{Driver: p.Driver, Pool: p.Name, Node: p.Node, Dev: &sl.Spec.Devices[j]}
				c.devices = append(c.devices, d)
				c.byKey[d.key()] = d
			}
		}
	}
	var complete []*resourceapi.ResourceSlice
	for _, k := range keys {
		complete = append(complete, c.poolSlices[k]...)
	}
	c.devs = allocator.NewDevices(complete)
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
		c.allocated.Hold(cl.Status.Allocation, nil)
		for _, r := range cl.Status.Allocation.Devices.Results {
			k := r.Driver + "/" + r.Pool + "/" + r.Device
			c.holders[k] = append(c.holders[k], holder{Claim: cl.Namespace + "/" + cl.Name, Pods: pods, Request: r.Request, Shared: r.ShareID != nil, Consumed: r.ConsumedCapacity})
		}
	}
	return c
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
