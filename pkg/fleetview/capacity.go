// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/deployments/static"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// Request is what `gpudra capacity` counts: one of a claim template, one
// device of a class, or one MIG device of a profile.
type Request struct {
	Template   string `json:"template,omitempty"` // namespace/name of a ResourceClaimTemplate
	Class      string `json:"class,omitempty"`
	MigProfile string `json:"migProfile,omitempty"`
	// Count is the devices per claim for Class and MigProfile (default 1).
	Count int64 `json:"count,omitempty"`
}

func (r Request) String() string {
	n := max(r.Count, 1)
	switch {
	case r.Template != "":
		return "claims from template " + r.Template
	case r.Class != "":
		return fmt.Sprintf("claims for %d device(s) of class %s", n, r.Class)
	}
	return fmt.Sprintf("claims for %d MIG device(s) of profile %s", n, r.MigProfile)
}

// Probe builds the claim a Request stands for. Errors name the flag and
// what the cluster offers instead.
func Probe(s *clusterview.Snapshot, r Request) (*resourceapi.ResourceClaim, error) {
	set := 0
	for _, v := range []string{r.Template, r.Class, r.MigProfile} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("give exactly one of --template NAMESPACE/NAME, --class NAME or --mig-profile PROFILE")
	}
	if r.Count < 0 || r.Count > 0 && r.Template != "" {
		return nil, fmt.Errorf("--count %d: a positive number of devices per claim, with --class or --mig-profile only", r.Count)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "gpudra-capacity-probe", Namespace: "default", UID: "gpudra-capacity-probe"}}
	switch {
	case r.Template != "":
		ns, name, ok := strings.Cut(r.Template, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("--template %q: expected NAMESPACE/NAME", r.Template)
		}
		var found *resourceapi.ResourceClaimTemplate
		for i := range s.ClaimTemplates {
			if t := &s.ClaimTemplates[i]; t.Namespace == ns && t.Name == name {
				found = t
			}
		}
		if found == nil {
			return nil, fmt.Errorf("--template %s: no ResourceClaimTemplate %s in namespace %s (kubectl get resourceclaimtemplates -n %s)", r.Template, name, ns, ns)
		}
		claim.Namespace = ns
		claim.Spec = *found.Spec.Spec.DeepCopy()
	case r.Class != "":
		if !hasClass(s, r.Class) {
			return nil, fmt.Errorf("--class %s: no such DeviceClass; the cluster has: %s", r.Class, strings.Join(classNames(s), ", "))
		}
		claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "device", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: r.Class, Count: r.Count}}}
	default:
		profiles := migProfiles(s)
		if !contains(profiles, r.MigProfile) {
			return nil, fmt.Errorf("--mig-profile %s: no node publishes MIG devices of that profile; published: %s (dynamic MIG offers the chart's migProfiles)", r.MigProfile, orNone(profiles))
		}
		// The profile's class, as users claim it (docs/mig.md); where the
		// chart's per-profile classes are off, the MIG class with a
		// profile selector, which matches the same devices.
		req := &resourceapi.ExactDeviceRequest{DeviceClassName: static.MigProfileClass(s.DriverName, r.MigProfile).Name, Count: r.Count}
		if !hasClass(s, req.DeviceClassName) {
			req.DeviceClassName = MigClass(s.DriverName)
			if !hasClass(s, req.DeviceClassName) {
				return nil, fmt.Errorf("--mig-profile: the DeviceClass %s of MIG devices does not exist; install the chart's classes or use --class", req.DeviceClassName)
			}
			sel := fmt.Sprintf("device.attributes['%s'].%s == '%s'", s.DriverName, deviceattr.AttrProfile, r.MigProfile)
			req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: sel}}}
		}
		claim.Spec.Devices.Requests = []resourceapi.DeviceRequest{{Name: "mig", Exactly: req}}
	}
	defaults(claim)
	return claim, nil
}

// MigClass is the chart's class of MIG devices for a driver name:
// mig.nvidia.com for gpu.nvidia.com.
func MigClass(driver string) string { return "mig." + strings.TrimPrefix(driver, "gpu.") }

// defaults fills in what the API server defaults in a stored claim and the
// allocator relies on: exact count mode, one device.
func defaults(c *resourceapi.ResourceClaim) {
	fix := func(mode *resourceapi.DeviceAllocationMode, count *int64) {
		if *mode == "" {
			*mode = resourceapi.DeviceAllocationModeExactCount
		}
		if *mode == resourceapi.DeviceAllocationModeExactCount && *count == 0 {
			*count = 1
		}
	}
	for i := range c.Spec.Devices.Requests {
		r := &c.Spec.Devices.Requests[i]
		if r.Exactly != nil {
			fix(&r.Exactly.AllocationMode, &r.Exactly.Count)
		}
		for j := range r.FirstAvailable {
			fix(&r.FirstAvailable[j].AllocationMode, &r.FirstAvailable[j].Count)
		}
	}
}

// CapacityReport is `gpudra capacity`'s answer.
type CapacityReport struct {
	Request Request                    `json:"request"`
	Nodes   []clusterview.NodeCapacity `json:"nodes"`
	Total   int                        `json:"total"`
	// AtLimit: some node's count stopped at the limit; the total is a floor.
	AtLimit bool `json:"atLimit,omitempty"`
}

// Capacity counts how many more claims like r the fleet takes now, per node
// (only node when not empty) and in total, with the scheduler's allocator.
func Capacity(ctx context.Context, s *clusterview.Snapshot, r Request, node string, limit int) (*CapacityReport, error) {
	claim, err := Probe(s, r)
	if err != nil {
		return nil, err
	}
	if node != "" {
		s = narrow(s, node)
		if len(s.Slices) == 0 {
			return nil, fmt.Errorf("--node %s: the node publishes no ResourceSlices", node)
		}
	}
	nodes, err := clusterview.Capacity(ctx, s, claim, limit)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r, err)
	}
	rep := &CapacityReport{Request: r, Nodes: nodes}
	for _, n := range nodes {
		rep.Total += n.Count
		rep.AtLimit = rep.AtLimit || n.AtLimit
	}
	return rep, nil
}

// WriteJSON writes the report as indented JSON.
func (r *CapacityReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteTable writes one row per node that takes at least one more claim
// (all nodes when all is set), then the total.
func (r *CapacityReport) WriteTable(w io.Writer, all bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tFITS")
	none := 0
	for _, n := range r.Nodes {
		if n.Count == 0 && !all {
			none++
			continue
		}
		more := ""
		if n.AtLimit {
			more = "+ (stopped at the limit)"
		}
		fmt.Fprintf(tw, "%s\t%d%s\n", n.Node, n.Count, more)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := fmt.Sprint(r.Total)
	if r.AtLimit {
		total = "at least " + total
	}
	if none > 0 {
		fmt.Fprintf(w, "(%d of %d nodes take none; -o wide lists them)\n", none, len(r.Nodes))
	}
	_, err := fmt.Fprintf(w, "TOTAL: %s more %s fit now (%s counted)\n", total, r.Request, plural(len(r.Nodes), "node"))
	return err
}

func migProfiles(s *clusterview.Snapshot) []string {
	seen := map[string]bool{}
	for _, sl := range currentSlices(s) {
		for j := range sl.Spec.Devices {
			d := &sl.Spec.Devices[j]
			if attrString(s.DriverName, d, deviceattr.AttrType) == deviceattr.TypeMIG {
				if p := attrString(s.DriverName, d, deviceattr.AttrProfile); p != "" {
					seen[p] = true
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func hasClass(s *clusterview.Snapshot, name string) bool { return contains(classNames(s), name) }

func classNames(s *clusterview.Snapshot) []string {
	var out []string
	for _, dc := range s.DeviceClasses {
		out = append(out, dc.Name)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}
