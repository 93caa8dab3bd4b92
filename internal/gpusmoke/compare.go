// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// gpudra smoke compare: what the plugin publishes against what nvidia-smi
// reports for the same GPUs.

package gpusmoke

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

type smiGPU struct {
	index                     int
	uuid, name, busID, driver string
	memoryMiB                 int64
}

func readSmiGPUs(path string) ([]smiGPU, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd := csv.NewReader(f)
	rd.TrimLeadingSpace = true
	rows, err := rd.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []smiGPU
	for _, row := range rows {
		if len(row) != 6 {
			return nil, fmt.Errorf("%s: %d fields in %q, want index,uuid,name,memory.total,pci.bus_id,driver_version", path, len(row), row)
		}
		idx, err1 := strconv.Atoi(strings.TrimSpace(row[0]))
		mem, err2 := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(row[3], "MiB")), 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: bad index or memory in %q", path, row)
		}
		out = append(out, smiGPU{index: idx, uuid: strings.TrimSpace(row[1]), name: strings.TrimSpace(row[2]), memoryMiB: mem, busID: strings.TrimSpace(row[4]), driver: strings.TrimSpace(row[5])})
	}
	return out, nil
}

func readSlices(path string) ([]resourceapi.ResourceSlice, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []resourceapi.ResourceSlice
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var s resourceapi.ResourceSlice
		if err := yaml.UnmarshalStrict([]byte(doc), &s); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, s)
	}
	return out, nil
}

func attrString(d resourceapi.Device, name string) string {
	a, ok := d.Attributes[resourceapi.QualifiedName(name)]
	switch {
	case !ok:
		return ""
	case a.StringValue != nil:
		return *a.StringValue
	case a.VersionValue != nil:
		return *a.VersionValue
	case a.IntValue != nil:
		return strconv.FormatInt(*a.IntValue, 10)
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue)
	}
	return ""
}

// normBusID writes a PCI bus ID as the plugin does: 4-digit domain, lower case.
func normBusID(id string) string {
	id = strings.ToLower(strings.TrimSpace(id))
	if dom, rest, ok := strings.Cut(id, ":"); ok && len(dom) > 4 {
		id = dom[len(dom)-4:] + ":" + rest
	}
	return id
}

// sameVersion compares dotted versions numerically: 535.104.05 = 535.104.5.
func sameVersion(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	if len(pa) != len(pb) {
		return false
	}
	for i := range pa {
		x, err1 := strconv.Atoi(pa[i])
		y, err2 := strconv.Atoi(pb[i])
		if err1 != nil || err2 != nil || x != y {
			return false
		}
	}
	return true
}

func short(uuid string) string {
	if len(uuid) > 12 {
		return uuid[:12]
	}
	return uuid
}

func smokeCompare(r *report, slicesFile, gpusFile, lgipFile string) {
	gpus, err := readSmiGPUs(gpusFile)
	if err != nil {
		r.fail("nvidia-smi --query-gpu", "%v", err)
		return
	}
	published, err := readSlices(slicesFile)
	if err != nil {
		r.fail("--print-slices output", "%v", err)
		return
	}
	byUUID := map[string]resourceapi.Device{}
	migProfiles := map[string][]string{} // parent UUID -> published MIG profiles
	counters := map[string][]string{}    // counter set -> counter names
	for _, s := range published {
		for _, cs := range s.Spec.SharedCounters {
			for name := range cs.Counters {
				counters[cs.Name] = append(counters[cs.Name], name)
			}
		}
		for _, d := range s.Spec.Devices {
			switch attrString(d, "type") {
			case "gpu":
				byUUID[attrString(d, "uuid")] = d
			case "mig":
				p := attrString(d, "parentUUID")
				if prof := attrString(d, "profile"); !slices.Contains(migProfiles[p], prof) {
					migProfiles[p] = append(migProfiles[p], prof)
				}
			}
		}
	}
	r.check(len(gpus) > 0, "GPUs", "nvidia-smi reports %d, the plugin publishes %d", len(gpus), len(byUUID))
	seen := map[string]bool{}
	for _, g := range gpus {
		seen[g.uuid] = true
		id := fmt.Sprintf("GPU %d", g.index)
		d, ok := byUUID[g.uuid]
		if !ok {
			r.fail(id+" published", "%s is not in the plugin's slices", g.uuid)
			continue
		}
		r.pass(id+" uuid", "%s as %s", g.uuid, d.Name)
		r.check(attrString(d, "productName") == g.name, id+" name", "published %q, nvidia-smi %q", attrString(d, "productName"), g.name)
		var memMiB int64 = -1
		if q, ok := d.Capacity[resourceapi.QualifiedName(deviceattr.CapMemory)]; ok {
			memMiB = q.Value.Value() >> 20
		}
		r.check(math.Abs(float64(memMiB-g.memoryMiB)) <= 1, id+" memory", "published %d MiB, nvidia-smi %d MiB", memMiB, g.memoryMiB)
		bus := attrString(d, "resource.kubernetes.io/pciBusID")
		r.check(bus != "" && bus == normBusID(g.busID), id+" PCI bus ID", "published %s, nvidia-smi %s", bus, g.busID)
		drv := attrString(d, "driverVersion")
		r.check(sameVersion(drv, g.driver), id+" driver version", "published %s, nvidia-smi %s", drv, g.driver)
	}
	for uuid, d := range byUUID {
		if !seen[uuid] {
			r.fail("GPU "+short(uuid), "published as %s but not reported by nvidia-smi", d.Name)
		}
	}
	compareMigProfiles(r, lgipFile, gpus, byUUID, migProfiles, counters)
}

// lgipRow matches a profile line of `nvidia-smi mig -lgip`:
// "|   0  MIG 1g.10gb          19     7/7        9.75       No     16     1     0   |".
var lgipRow = regexp.MustCompile(`^\|\s+(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+\d+/\d+\s`)

var profileCounter = regexp.MustCompile(`^profile-(\d+)-instances$`)

func compareMigProfiles(r *report, lgipFile string, gpus []smiGPU, byUUID map[string]resourceapi.Device, published map[string][]string, counters map[string][]string) {
	if lgipFile == "" {
		r.skip("MIG profiles", "no nvidia-smi mig -lgip output given")
		return
	}
	data, err := os.ReadFile(lgipFile)
	if err != nil {
		r.skip("MIG profiles", "%v", err)
		return
	}
	names := map[int]map[string]string{} // GPU index -> profile name -> ID
	for _, line := range strings.Split(string(data), "\n") {
		m := lgipRow.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		idx, _ := strconv.Atoi(m[1])
		if names[idx] == nil {
			names[idx] = map[string]string{}
		}
		names[idx][m[2]] = m[3]
	}
	if len(names) == 0 {
		first := strings.TrimSpace(strings.SplitN(strings.TrimSpace(string(data)), "\n", 2)[0])
		r.skip("MIG profiles", "nvidia-smi mig -lgip lists none (%s); it answers only for GPUs in MIG mode, which this test never changes", first)
		return
	}
	for _, g := range gpus {
		lgip, ok := names[g.index]
		id := fmt.Sprintf("GPU %d", g.index)
		if !ok {
			continue
		}
		var unknown []string
		for _, p := range published[g.uuid] {
			if _, ok := lgip[p]; !ok {
				unknown = append(unknown, p)
			}
		}
		sort.Strings(unknown)
		r.check(len(unknown) == 0, id+" MIG profile names", "%d published, all in nvidia-smi mig -lgip (%d profiles); unknown: %v", len(published[g.uuid]), len(lgip), unknown)

		ids := map[string]bool{}
		for _, v := range lgip {
			ids[v] = true
		}
		var used, bad []string
		for _, cs := range byUUID[g.uuid].ConsumesCounters {
			for _, c := range counters[cs.CounterSet] {
				if m := profileCounter.FindStringSubmatch(c); m != nil {
					used = append(used, m[1])
					if !ids[m[1]] {
						bad = append(bad, c)
					}
				}
			}
		}
		if len(used) == 0 {
			r.skip(id+" MIG profile IDs", "no profile ID published for this GPU (only instance-capped profiles carry one)")
			continue
		}
		sort.Strings(bad)
		r.check(len(bad) == 0, id+" MIG profile IDs", "published IDs %v; not in nvidia-smi mig -lgip: %v", used, bad)
	}
}

// ---- prepare: one whole GPU through the plugin, real nvcdi ----
