// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/dcgmview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const podResourcesNS = "gpu-podresources"

// TestPodResources plays dcgm-exporter's side (--kubernetes-enable-dra):
// pods with a whole GPU, a pair of dynamic MIG devices, a time-sliced GPU
// and a memory fraction run; the kubelet's PodResources List over its
// socket and the ResourceSlices are resolved by the exporter's rules
// (pkg/dcgmview), and each container's identity is held against what the
// container saw (nvidia-smi -L) and what the simulated NVML holds: the GPU
// UUID; for a dynamic MIG device the parent, and from its name the parent's
// minor (the node's /dev/nvidia<minor>), the GPU instance profile ID NVML
// reports for the profile the container sees (nvidia-smi mig -lgip) and the
// placement start of that GPU instance. Then an admin partitions an idle
// GPU while the plugin is stopped, and a pod on one of those static MIG
// devices is attributed by its uuid (testStaticMig).
func TestPodResources(t *testing.T) {
	start := time.Now()
	requireCleanNode(t)
	gpudra := startGpudraBuild(t)
	testNamespace(t, podResourcesNS)
	pods := []string{"whole", "mig-pair", "time-sliced", "fraction"}
	applyYAML(t, workloadSpecs(podResourcesNS, pods...))
	waitRunningIn(t, podResourcesNS, pods...)
	saw := map[string]seen{}
	for _, p := range pods {
		for _, c := range workloadPods[p] {
			saw[p+"/"+c] = look(t, podResourcesNS, p, c)
		}
	}

	resp, err := dcgmview.List(context.Background(), dcgmview.SocketPath(kubeletDir))
	if err != nil {
		t.Fatal(err)
	}
	ix := dcgmview.NewIndex(completePool(t))
	got := map[string][]dcgmview.ContainerDevice{}
	for _, d := range dcgmview.Containers(resp, ix) {
		if d.Namespace == podResourcesNS {
			got[d.Pod+"/"+d.Container] = append(got[d.Pod+"/"+d.Container], d)
		}
	}
	lgip := nvmlProfileIDs(t)
	for key, s := range saw {
		pod, ctr, _ := strings.Cut(key, "/")
		claim := claimOf(t, podResourcesNS, pod, "gpu")
		d, ok := ownDevice(t, key, got[key], claim, s)
		if !ok {
			continue
		}
		id := d.Identity
		t.Logf("%s: claim %s, device %s/%s (share %q) -> %+v spec %+v; saw %s %v", key, d.ClaimName, d.Pool, d.Device, d.ShareID, id, id.Dynamic, s.gpu, s.migs)
		if d.ClaimName != claim || d.ClaimNamespace != podResourcesNS {
			t.Errorf("%s: PodResources names claim %s/%s, the pod's claim is %s/%s", key, d.ClaimNamespace, d.ClaimName, podResourcesNS, claim)
		}
		if !slices.ContainsFunc(d.CDIDevices, func(c string) bool { return strings.HasSuffix(c, "-"+d.Device) }) {
			t.Errorf("%s: CDI devices %v of %s do not name it", key, d.CDIDevices, d.Device)
		}
		if !d.Resolved || id.GPUUUID != s.gpu {
			t.Errorf("%s: the exporter attributes %s to GPU %q (resolved %v); the container sees %s", key, d.Device, id.GPUUUID, d.Resolved, s.gpu)
			continue
		}
		switch pod {
		case "whole", "time-sliced", "fraction":
			if id.Type != "gpu" || len(s.migs) != 0 {
				t.Errorf("%s: resolved as %q, the container sees MIG devices %v; want a GPU", key, id.Type, s.migs)
			}
			// A share is told apart from the GPU's other shares by its
			// share ID, which the kubelet has from the prepare result.
			if shared := d.ShareID != ""; shared != (pod == "fraction") {
				t.Errorf("%s: share ID %q; only the fraction is a share of its device", key, d.ShareID)
			}
			if pod == "time-sliced" && timeSlice(t, id.GPUUUID) != "Long" {
				t.Errorf("%s: %s is not the time-sliced GPU (time slice %s)", key, id.GPUUUID, timeSlice(t, id.GPUUUID))
			}
		case "mig-pair":
			checkDynamicMig(t, key, ctr, id, s, lgip)
		}
	}
	if t.Failed() {
		return
	}
	kubectl(t, "delete", "namespace", podResourcesNS, "--wait=true", "--timeout=120s")
	waitNodeClean(t, "after TestPodResources", nil)
	t.Logf("TestPodResources body without static MIG: %s", time.Since(start).Round(100*time.Millisecond))
	testStaticMig(t, gpudra())
	t.Logf("TestPodResources body: %s", time.Since(start).Round(100*time.Millisecond))
}

// ownDevice picks a container's own device from what PodResources lists
// for it. The kubelet lists every device of each claim a container uses,
// whatever request the container names (k8s.io/kubernetes v1.37.2
// pkg/kubelet/cm/dra/manager.go GetContainerClaimInfos selects claims by
// name only; container_manager_linux.go GetDynamicResources): both
// containers of the MIG pair see both MIG devices there. The exporter then
// keys each container by the parent's UUID and keeps the first device it
// meets (toDeviceToPodsDRA), so per-container MIG labels need a claim per
// container (docs/monitoring.md). Here the list must be exactly the
// claim's allocation, and the container's own device the one of the
// profile it sees.
func ownDevice(t *testing.T, key string, listed []dcgmview.ContainerDevice, claim string, s seen) (dcgmview.ContainerDevice, bool) {
	t.Helper()
	var names []string
	for _, d := range listed {
		names = append(names, d.Device)
	}
	var want []string
	for _, dev := range allocatedDevices(t, podResourcesNS, claim) {
		want = append(want, dev)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("%s: PodResources lists devices %v of %s, its claim %s holds %v", key, names, driverName, claim, want)
		return dcgmview.ContainerDevice{}, false
	}
	if len(listed) == 1 {
		return listed[0], true
	}
	var own []dcgmview.ContainerDevice
	for _, d := range listed {
		if len(s.migs) == 1 && strings.HasPrefix(s.migs[0], d.Identity.Profile+"=") {
			own = append(own, d)
		}
	}
	if len(own) != 1 {
		t.Errorf("%s: %d of the listed devices %v are of the MIG profile the container sees (%v)", key, len(own), names, s.migs)
		return dcgmview.ContainerDevice{}, false
	}
	return own[0], true
}

// checkDynamicMig holds the exporter's identity of a dynamic MIG device
// against the container's MIG device (nvidia-smi -L: profile and UUID) and
// the simulated NVML's state of its parent.
func checkDynamicMig(t *testing.T, key, ctr string, id dcgmview.Identity, s seen, lgip map[string]uint32) {
	t.Helper()
	if len(s.migs) != 1 {
		t.Errorf("%s: the container sees MIG devices %v, want one", key, s.migs)
		return
	}
	profile, migUUID, _ := strings.Cut(s.migs[0], "=")
	if want := map[string]string{"small": "1g.10gb", "big": "3g.40gb"}[ctr]; profile != want {
		t.Errorf("%s: the container sees a %s MIG device, its request asks %s", key, profile, want)
	}
	if id.Type != "mig" || id.Profile != profile || id.MIGUUID != "" || id.Dynamic == nil {
		t.Errorf("%s: resolved %+v (spec %+v); want a dynamic %s MIG device without uuid whose name the exporter reads", key, id, id.Dynamic, profile)
		return
	}
	// The container's MIG device is the simulated NVML's: its device file
	// names the same profile and parent.
	if f := readTrim(t, filepath.Join(stateDir(), "simulated", "dev", "mig", migUUID)); f != migUUID+"\t"+profile+"\t"+s.gpu {
		t.Errorf("%s: the simulated MIG device %s is %q, want profile %s on %s", key, migUUID, f, profile, s.gpu)
	}
	if minor := simulatedMinor(t, s.gpu); id.Dynamic.ParentMinor != minor {
		t.Errorf("%s: the exporter reads parent minor %d from the name; %s is /dev/nvidia%d", key, id.Dynamic.ParentMinor, s.gpu, minor)
	}
	wantID, ok := lgip[profile]
	if !ok || id.Dynamic.GIProfileID != wantID {
		t.Errorf("%s: the exporter reads GPU instance profile ID %d; NVML lists %s as ID %d (known %v)", key, id.Dynamic.GIProfileID, profile, wantID, ok)
	}
	// The parent holds one GPU instance of that profile (the pair's other
	// device is of another profile): its placement is the container's.
	var starts []uint32
	for _, in := range simulatedInstances(t)[s.gpu] {
		if in.ProfileID == wantID {
			starts = append(starts, in.Start)
		}
	}
	if len(starts) != 1 || starts[0] != id.Dynamic.PlacementStart {
		t.Errorf("%s: the exporter reads placement start %d; NVML's %s instances on %s start at %v", key, id.Dynamic.PlacementStart, profile, s.gpu, starts)
	}
}

// nvmlProfileIDs is what `nvidia-smi mig -lgip` lists for the deployed
// simulated model: GPU instance profile name -> ID, as NVML reports them
// (the plugin's own discovery of a fresh simulated node of that profile).
func nvmlProfileIDs(t *testing.T) map[string]uint32 {
	t.Helper()
	pods := pluginPodList(t)
	if len(pods) != 1 {
		t.Fatalf("%d plugin pods", len(pods))
	}
	profile := envOf(pods[0].Spec.Containers[0], "SIMULATE_PROFILE")
	_, inv, err := simulate.Discover(profile, "lgip", filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatalf("simulated profile %q of the plugin pod: %v", profile, err)
	}
	ids := map[string]uint32{}
	for _, p := range inv.GPUs[0].MigProfiles {
		ids[p.Name] = p.Info.Id
	}
	return ids
}

// simulatedMinor is the minor of the node's device file for a GPU
// (simulated /dev/nvidia<minor> holds "<uuid>\t<product name>").
func simulatedMinor(t *testing.T, uuid string) uint32 {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(stateDir(), "simulated", "dev", "nvidia[0-9]*"))
	for _, f := range files {
		var minor uint32
		if _, err := fmt.Sscanf(filepath.Base(f), "nvidia%d", &minor); err == nil && strings.HasPrefix(readTrim(t, f), uuid+"\t") {
			return minor
		}
	}
	t.Fatalf("no simulated device file for %s among %v", uuid, files)
	return 0
}

// simulatedInstance is a GPU instance in the simulated NVML's MIG state.
type simulatedInstance struct {
	ProfileID uint32 `json:"profileID"`
	Start     uint32 `json:"start"`
}

// simulatedInstances reads the simulated NVML's newest MIG state: GPU UUID
// -> its GPU instances.
func simulatedInstances(t *testing.T) map[string][]simulatedInstance {
	t.Helper()
	var newest string
	newestN := -1
	files, _ := filepath.Glob(filepath.Join(stateDir(), "simulated", "mig-state", "mig-state.*.json"))
	for _, f := range files {
		var n int
		if _, err := fmt.Sscanf(filepath.Base(f), "mig-state.%d.json", &n); err == nil && n > newestN {
			newest, newestN = f, n
		}
	}
	var state map[string]struct {
		Instances []simulatedInstance `json:"instances"`
	}
	data, err := os.ReadFile(newest)
	if err == nil {
		err = json.Unmarshal(data, &state)
	}
	if err != nil {
		t.Fatalf("simulated MIG state %q: %v", newest, err)
	}
	out := map[string][]simulatedInstance{}
	for uuid, g := range state {
		out[uuid] = g.Instances
	}
	return out
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
