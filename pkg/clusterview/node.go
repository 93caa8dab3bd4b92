// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"sort"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// NodeDevices is what one node publishes for the snapshot's driver, as a
// request with no selector would see it, and the claims allocated there.
type NodeDevices struct {
	Name string
	// Pools are the driver's pools on the node.
	Pools   []Pool
	Devices DeviceCounts
	ByType  []DeviceCount
	Claims  []NodeClaim
}

// OnNode reads one node's devices and claims from the snapshot.
func OnNode(s *Snapshot, name string) NodeDevices {
	c := published(s, "")
	nd := NodeDevices{Name: name}
	for _, p := range c.pools {
		if p.Node == name && p.Driver == s.DriverName {
			nd.Pools = append(nd.Pools, *p)
		}
	}
	c.countNodeDevices(&nd)
	c.nodeClaims(&nd)
	return nd
}

// DeviceCounts sums a node's published devices.
type DeviceCounts struct {
	Total          int `json:"total"`
	Allocated      int `json:"allocated"`
	CounterBlocked int `json:"counterBlocked"`
	Tainted        int `json:"tainted"`
	Free           int `json:"free"`
}

// DeviceCount is DeviceCounts for one device type (gpu, mig).
type DeviceCount struct {
	Type string `json:"type"`
	DeviceCounts
}

// NodeClaim is a claim allocated on the node.
type NodeClaim struct {
	Claim    string   `json:"claim"`
	Devices  []string `json:"devices"`
	Pods     []string `json:"pods,omitempty"`
	Prepared bool     `json:"prepared"` // the plugin wrote device status
}

// countNodeDevices sorts the node's devices as a request with no selector
// would see them.
func (c *cluster) countNodeDevices(nr *NodeDevices) {
	byType := map[string]*DeviceCount{}
	for _, d := range c.devices {
		if d.Node != nr.Name || d.Driver != c.snap.DriverName {
			continue
		}
		t := d.typ()
		if byType[t] == nil {
			byType[t] = &DeviceCount{Type: t}
		}
		counts := []*DeviceCounts{&byType[t].DeviceCounts}
		if t != deviceattr.TypeMonitor {
			// Monitor devices (one per GPU, admin access only) are
			// views of GPUs counted already: only their own row has them.
			counts = append(counts, &nr.Devices)
		}
		for _, dc := range counts {
			dc.Total++
			switch st := c.state(d, &resourceapi.ExactDeviceRequest{}); {
			case st == stateTainted:
				dc.Tainted++
			case ptr.Deref(d.Dev.AllowMultipleAllocations, false):
				// A shared GPU is free while it has room for the
				// smallest share its capacity policy allows.
				if c.sharedFull(d) {
					dc.Allocated++
				} else {
					dc.Free++
				}
			case st == stateAllocated:
				dc.Allocated++
			case st == stateCounters:
				dc.CounterBlocked++
			default:
				dc.Free++
			}
		}
	}
	for _, t := range byType {
		nr.ByType = append(nr.ByType, *t)
	}
	sort.Slice(nr.ByType, func(i, j int) bool { return nr.ByType[i].Type < nr.ByType[j].Type })
}

// nodeClaims lists the claims allocated on the node; a claim whose device
// status the plugin wrote has been prepared.
func (c *cluster) nodeClaims(nr *NodeDevices) {
	for i := range c.snap.Claims {
		cl := &c.snap.Claims[i]
		a := cl.Status.Allocation
		if a == nil {
			continue
		}
		var devs []string
		for _, r := range a.Devices.Results {
			if d := c.byKey[r.Driver+"/"+r.Pool+"/"+r.Device]; r.Driver == c.snap.DriverName && (d != nil && d.Node == nr.Name || d == nil && allocationNode(a) == nr.Name) {
				devs = append(devs, r.Device)
			}
		}
		if len(devs) == 0 {
			continue
		}
		nc := NodeClaim{Claim: cl.Namespace + "/" + cl.Name, Devices: devs}
		for _, ref := range cl.Status.ReservedFor {
			if ref.Resource == "pods" {
				nc.Pods = append(nc.Pods, cl.Namespace+"/"+ref.Name)
			}
		}
		for _, st := range cl.Status.Devices {
			if st.Driver == c.snap.DriverName {
				nc.Prepared = true
			}
		}
		nr.Claims = append(nr.Claims, nc)
	}
	sort.Slice(nr.Claims, func(i, j int) bool { return nr.Claims[i].Claim < nr.Claims[j].Claim })
}
