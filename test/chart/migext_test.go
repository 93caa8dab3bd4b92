// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/deployments/static"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const driver = "gpu.nvidia.com"

// migClasses renders the chart and returns its DeviceClasses that map a
// nvidia.com/mig-* extended resource, by extended resource name.
func migClasses(t *testing.T, set ...string) map[string]*resourceapi.DeviceClass {
	t.Helper()
	out := map[string]*resourceapi.DeviceClass{}
	names := map[string]bool{}
	for _, doc := range strings.Split(string(helmTemplate(t, set...)), "\n---") {
		if !strings.Contains(doc, "kind: DeviceClass") {
			continue
		}
		dc := &resourceapi.DeviceClass{}
		if err := yaml.UnmarshalStrict([]byte(doc), dc); err != nil {
			t.Fatalf("DeviceClass: %v\n%s", err, doc)
		}
		if names[dc.Name] {
			t.Errorf("DeviceClass %s rendered twice", dc.Name)
		}
		names[dc.Name] = true
		r := dc.Spec.ExtendedResourceName
		if r == nil || !strings.HasPrefix(*r, "nvidia.com/mig-") {
			continue
		}
		if _, dup := out[*r]; dup {
			t.Errorf("two DeviceClasses map %s", *r)
		}
		out[*r] = dc
	}
	return out
}

// driverProfiles lists the MIG profile names the driver discovers on each
// model it simulates: its own tables, named as the driver names them.
func driverProfiles(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, m := range simulate.ModelNames() {
		_, inv, err := simulate.Discover(m+"x1", "n1", filepath.Join(t.TempDir(), "sim"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range inv.GPUs[0].MigProfiles {
			out[m] = append(out[m], p.Name)
		}
		if len(out[m]) == 0 {
			t.Fatalf("model %s has no MIG profiles", m)
		}
	}
	return out
}

// resourceName is the device plugin's resource name for a profile.
func resourceName(profile string) string {
	return "nvidia.com/mig-" + strings.ReplaceAll(profile, "+", ".")
}

// The chart's MIG classes are exactly one per profile of the driver's
// tables, with names the API accepts, so the list cannot drift from the
// models the driver supports.
func TestChartMigExtendedResourcesMatchTheDriversProfiles(t *testing.T) {
	want := map[string]string{}
	for _, profiles := range driverProfiles(t) {
		for _, p := range profiles {
			want[resourceName(p)] = p
		}
	}
	got := migClasses(t)
	var missing, extra []string
	for r, p := range want {
		if _, ok := got[r]; !ok {
			missing = append(missing, r+" ("+p+")")
		}
	}
	for r := range got {
		if _, ok := want[r]; !ok {
			extra = append(extra, r)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra) != 0 {
		t.Errorf("values.yaml migExtendedResources.profiles drifted from the driver's tables:\n  missing %v\n  not a driver profile %v", missing, extra)
	}
	for r, dc := range got {
		// The allocator tests and benchmarks build these classes with
		// static.MigProfileClass: the chart must render exactly that.
		if p, ok := want[r]; ok && !sameClass(dc, static.MigProfileClass(driver, p)) {
			same := static.MigProfileClass(driver, p)
			t.Errorf("class for %s:\nchart:  %s %+v\nstatic: %s %+v", want[r], dc.Name, dc.Spec, same.Name, same.Spec)
		}
		if errs := validation.IsDNS1123Subdomain(dc.Name); len(errs) != 0 {
			t.Errorf("class %s: %v", dc.Name, errs)
		}
		if errs := content.IsLabelKey(r); len(errs) != 0 {
			t.Errorf("extended resource %s: %v", r, errs)
		}
		if !strings.HasSuffix(dc.Name, ".nvidia.com") || !strings.HasPrefix(dc.Name, strings.TrimPrefix(r, "nvidia.com/")+".") {
			t.Errorf("class %s for %s: want mig-<profile>.nvidia.com", dc.Name, r)
		}
		if len(dc.Spec.Selectors) != 1 || dc.Spec.Selectors[0].CEL == nil ||
			!strings.Contains(dc.Spec.Selectors[0].CEL.Expression, ".profile == '"+want[r]+"'") {
			t.Errorf("class %s selects %+v, want MIG devices of profile %q", dc.Name, dc.Spec.Selectors, want[r])
		}
	}
	if dc := got["nvidia.com/mig-1g.10gb.me"]; dc == nil || dc.Name != "mig-1g.10gb.me.nvidia.com" {
		t.Errorf("1g.10gb+me: class %v, want mig-1g.10gb.me.nvidia.com for nvidia.com/mig-1g.10gb.me (the device plugin's name)", dc)
	}
}

func sameClass(a, b *resourceapi.DeviceClass) bool {
	return a.Name == b.Name && reflect.DeepEqual(a.Spec, b.Spec)
}

// deviceProfile is the profile attribute of an allocated device.
func deviceProfile(c *schedtest.Cluster, name string) string {
	for _, s := range c.Slices {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				if a, ok := d.Attributes[deviceattr.AttrProfile]; ok && a.StringValue != nil {
					return *a.StringValue
				}
				return "<none>"
			}
		}
	}
	return "<no device>"
}

// The real scheduler allocator, given a claim of each rendered class (as
// the scheduler makes for an extended resource), picks a MIG device of that
// class's profile on every model, and never a whole GPU.
func TestChartMigExtendedResourcesAllocateTheirProfile(t *testing.T) {
	classes := migClasses(t)
	for model, profiles := range driverProfiles(t) {
		t.Run(model, func(t *testing.T) {
			for _, p := range profiles {
				dc := classes[resourceName(p)]
				if dc == nil {
					t.Errorf("no class for %s", p)
					continue
				}
				// MIG mode on, so that Ampere GPUs offer dynamic MIG too.
				_, inv, err := simulate.Discover(model+"x1"+simulate.MigSuffix, "n1", filepath.Join(t.TempDir(), "sim"))
				if err != nil {
					t.Fatal(err)
				}
				c := schedtest.New(t, driver, "n1", resourceslices.Build("n1", inv, resourceslices.Options{DynamicMIG: true}))
				c.Classes = append(c.Classes, dc)
				devs := schedtest.Devices(c.Allocate(schedtest.Claim("c", schedtest.Request("r", dc.Name, 1))))
				if len(devs) != 1 || deviceProfile(c, devs[0]) != p {
					t.Errorf("%s (class %s) allocated %v, profile %q", resourceName(p), dc.Name, devs, deviceProfile(c, first(devs)))
				}
			}
		})
	}
}

// classNames lists the names of every DeviceClass the chart renders, sorted.
func classNames(t *testing.T, set ...string) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(string(helmTemplate(t, set...)), "\n---") {
		if strings.Contains(doc, "kind: DeviceClass") {
			dc := &resourceapi.DeviceClass{}
			if err := yaml.Unmarshal([]byte(doc), dc); err != nil {
				t.Fatal(err)
			}
			out = append(out, dc.Name)
		}
	}
	slices.Sort(out)
	return out
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// migExtendedResources.enabled=false removes every MIG class and keeps the
// others; extraProfiles adds classes without repeating the defaults; the
// schema refuses profile names that would make invalid object names.
func TestChartMigExtendedResourcesValues(t *testing.T) {
	if got := migClasses(t, "migExtendedResources.enabled=false"); len(got) != 0 {
		t.Errorf("enabled=false still renders %d MIG classes", len(got))
	}
	defaults := migClasses(t)
	want := classNames(t)
	for _, dc := range defaults {
		want = slices.DeleteFunc(want, func(n string) bool { return n == dc.Name })
	}
	if got := classNames(t, "migExtendedResources.enabled=false"); !slices.Equal(got, want) || !slices.Contains(got, "gpu.nvidia.com") {
		t.Errorf("enabled=false: DeviceClasses %v, want the others unchanged: %v", got, want)
	}

	got := migClasses(t, "migExtendedResources.extraProfiles={3g.47gb,1g.10gb}", "driverName=gpu.example.com")
	if len(got) != len(defaults)+1 {
		t.Errorf("extraProfiles 3g.47gb (new) and 1g.10gb (a default): %d classes, want %d", len(got), len(defaults)+1)
	}
	dc := got["nvidia.com/mig-3g.47gb"]
	if dc == nil || dc.Name != "mig-3g.47gb.example.com" ||
		!strings.Contains(dc.Spec.Selectors[0].CEL.Expression, "device.driver == 'gpu.example.com'") {
		t.Errorf("extra profile 3g.47gb with driverName gpu.example.com: %+v", dc)
	}

	for _, bad := range []string{"1G.10GB", "1g.10gb+", "1g.10gb me", "mig-1g.10gb"} {
		out, err := exec.Command(helmBinary(t), "template", "x", chartDir, "--kube-version", "v1.37.2",
			"--set-string", "migExtendedResources.extraProfiles[0]="+bad).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "extraProfiles") {
			t.Errorf("profile %q accepted (err %v):\n%.300s", bad, err, out)
		}
	}
}
