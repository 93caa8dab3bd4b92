// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// TestDriver runs the scenarios in order on one cluster: they share its
// eight simulated GPUs.
func TestDriver(t *testing.T) {
	kubectl(t, "apply", "-f", filepath.Join(repoRoot, "demo", "specs", "00-namespace.yaml"))
	for _, step := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"ResourceSlicesPublished", testResourceSlices},
		{"NodeRestrictionPolicy", testNodeRestriction},
		{"PluginPodHardened", testPluginPodHardened},
		{"DistinctGPUsFromOneTemplate", testDistinctGPUs},
		{"SharedClaims", testSharedClaims},
		{"SelectorsAndUnsatisfiable", testSelectors},
		{"ExtendedResource", testExtendedResource},
		{"InvalidConfigFailsOnlyItsPod", testInvalidConfig},
		{"PluginRestartKeepsGPUs", testPluginRestart},
		{"MIGFourContainers", testMIG},
		{"MemoryFractionAcrossNamespaces", testMemoryFraction},
		{"NothingLeftBehind", testCleanup},
	} {
		if !t.Run(step.name, step.fn) {
			t.FailNow()
		}
	}
}

func testResourceSlices(t *testing.T) {
	slices := completePool(t)
	gpus, migs, counterSets, shareable := 0, 0, 0, 0
	for _, s := range slices {
		counterSets += len(s.Spec.SharedCounters)
		for _, d := range s.Spec.Devices {
			switch *d.Attributes["type"].StringValue {
			case "gpu":
				gpus++
				if d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations {
					shareable++
				}
				if *d.Attributes["productName"].StringValue != "NVIDIA H100 80GB HBM3" || d.Attributes["resource.kubernetes.io/pcieRoot"].StringValue == nil || d.Attributes["driverVersion"].VersionValue == nil {
					t.Errorf("GPU %s attributes: %v", d.Name, d.Attributes)
				}
			case "mig":
				migs++
			}
		}
	}
	// deploy.sh offers GPU 7 for memory-fraction sharing; the others are
	// partitionable for dynamic MIG.
	// 25 MIG placements per H100: the simulator's real placement table
	// (NVIDIA's `nvidia-smi mig -lgipp`), see pkg/simulate/models.go.
	if gpus != 8 || counterSets != 7 || shareable != 1 || migs != 7*25 {
		t.Fatalf("published %d GPUs (%d shareable), %d MIG devices, %d counter sets; want 8 GPUs (1 shareable), 175 MIG devices, 7 counter sets", gpus, shareable, migs, counterSets)
	}
	t.Logf("%d slices: %d GPUs (%d shareable), %d MIG devices, %d counter sets accepted by the apiserver", len(slices), gpus, shareable, migs, counterSets)
}

// testNodeRestriction writes another node's ResourceSlice with the plugin's
// own pod-bound token: the admission policy must deny it.
func testNodeRestriction(t *testing.T) {
	ctx := context.Background()
	pods := pluginPodList(t)
	if len(pods) == 0 {
		t.Fatal("no plugin pod")
	}
	p := pods[0]
	tok, err := client.CoreV1().ServiceAccounts(driverNS).CreateToken(ctx, p.Spec.ServiceAccountName, &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](600),
		BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = tok.Status.Token
	asPlugin := kubernetes.NewForConfigOrDie(cfg)
	slice := func(node string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"},
			Spec: resourceapi.ResourceSliceSpec{Driver: driverName, NodeName: &node,
				Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}, Devices: []resourceapi.Device{{Name: "gpu-99"}}},
		}
	}
	_, err = asPlugin.ResourceV1().ResourceSlices().Create(ctx, slice("another-node"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) || !strings.Contains(err.Error(), "may not modify ResourceSlices of node another-node") {
		t.Fatalf("writing another node's slice with the plugin's token: %v", err)
	}
	if _, err := asPlugin.ResourceV1().ResourceSlices().Create(ctx, slice(p.Spec.NodeName), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the plugin may not write its own node's slice: %v", err)
	}
}

func testDistinctGPUs(t *testing.T) {
	apply(t, "01-gpu-by-model.yaml")
	waitRunning(t, "h100-a", "h100-b")
	modelA, a, _ := gpuOf(t, "h100-a", "")
	modelB, b, _ := gpuOf(t, "h100-b", "")
	if a == b || !strings.Contains(modelA, "H100") || !strings.Contains(modelB, "H100") {
		t.Fatalf("h100-a got %s %s, h100-b got %s %s; want two different H100s", modelA, a, modelB, b)
	}
	logs := kubectl(t, "logs", "-n", ns, "h100-a")
	if !strings.Contains(logs, "NVIDIA_VISIBLE_DEVICES="+a) {
		t.Fatalf("h100-a environment does not name its GPU:\n%s", logs)
	}
}

func testSharedClaims(t *testing.T) {
	apply(t, "03-shared-claim.yaml")
	waitRunning(t, "shared-1", "shared-2", "two-containers")
	_, s1, _ := gpuOf(t, "shared-1", "")
	_, s2, _ := gpuOf(t, "shared-2", "")
	if s1 != s2 {
		t.Fatalf("pods sharing a ResourceClaim see %s and %s", s1, s2)
	}
	// The shared claim is time-sliced: the GPU's time slice is set while it is prepared.
	if got := timeSlice(t, s1); got != "Long" {
		t.Fatalf("time slice of the shared claim's GPU is %q, want Long", got)
	}
	_, c1, _ := gpuOf(t, "two-containers", "first")
	_, c2, _ := gpuOf(t, "two-containers", "second")
	if c1 != c2 || c1 == s1 {
		t.Fatalf("containers sharing a claim see %s and %s (shared claim has %s)", c1, c2, s1)
	}
}

func testSelectors(t *testing.T) {
	apply(t, "02-gpu-by-memory.yaml")
	waitRunning(t, "big-memory")
	if model, _, _ := gpuOf(t, "big-memory", ""); !strings.Contains(model, "80GB") {
		t.Fatalf("memory >= 64Gi selected %s", model)
	}
	// Its claim asks for MPS with limits: the container gets the daemon's pipe and them.
	if logs := kubectl(t, "logs", "-n", ns, "big-memory"); !strings.Contains(logs, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50") || !strings.Contains(logs, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=40960M") || !strings.Contains(logs, "CUDA_MPS_PIPE_DIRECTORY=") {
		t.Fatalf("MPS client limits missing:\n%s", logs)
	}
	applyYAML(t, gpuTemplate("no-such-gpu", ns, "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B300'")+`---
apiVersion: v1
kind: Pod
metadata: {name: unsatisfiable, namespace: gpu-demo}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: no-such-gpu}]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [{name: gpu}]}}]
`)
	waitFor(t, "a scheduler event explaining why unsatisfiable is Pending", 60*time.Second, func() (bool, string) {
		ev := events(t, "Pod", "unsatisfiable")
		return strings.Contains(ev, "FailedScheduling") && strings.Contains(ev, "claim"), ev
	})
	if p := pod(t, "unsatisfiable"); p.Spec.NodeName != "" {
		t.Fatalf("unsatisfiable pod was bound to %s", p.Spec.NodeName)
	}
	deletePods(t, "unsatisfiable")
}

func testExtendedResource(t *testing.T) {
	apply(t, "04-extended-resource.yaml")
	waitRunning(t, "extended-resource")
	if model, uuid, _ := gpuOf(t, "extended-resource", ""); !strings.Contains(model, "H100") || uuid == "" {
		t.Fatalf("nvidia.com/gpu: 1 got %q %q", model, uuid)
	}
}

func testInvalidConfig(t *testing.T) {
	// The admission webhook would refuse this template at once (see
	// TestWebhook); this test is about the plugin's own check at prepare.
	restoreWebhook := stopWebhook(t)
	defer restoreWebhook()
	applyYAML(t, badConfigTemplate(ns)+`---
apiVersion: v1
kind: Pod
metadata: {name: bad-config, namespace: gpu-demo}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: bad-config}]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [{name: gpu}]}}]
`)
	waitFor(t, "an event naming the bad field", 60*time.Second, func() (bool, string) {
		ev := events(t, "Pod", "bad-config")
		return strings.Contains(ev, `unknown field "sharing.timeSlicingConfig.intervall"`), ev
	})
	for _, name := range []string{"h100-a", "h100-b", "shared-1", "big-memory", "extended-resource"} {
		if p := pod(t, name); p.Status.Phase != "Running" {
			t.Errorf("pod %s is %s after another pod's bad config", name, p.Status.Phase)
		}
	}
	deletePods(t, "bad-config")
}

// testPluginRestart rolls the DaemonSet (the new plugin pod starts before
// the old one stops, handing the socket over) and then deletes the plugin
// pod outright: running pods keep their GPUs, and a claim prepared by an
// old pod is unprepared by the new one.
func testPluginRestart(t *testing.T) {
	_, before, _ := gpuOf(t, "h100-a", "")
	kubectl(t, "rollout", "restart", "daemonset", "-n", driverNS)
	kubectl(t, "rollout", "status", "daemonset", "-n", driverNS, "--timeout=120s")
	// Without slices, the next plugin publishes them ahead of the
	// resourceslice controller, which must adopt them unchanged.
	kubectl(t, "delete", "resourceslices", "--field-selector", "spec.driver="+driverName)
	old := pluginPods(t)
	kubectl(t, "delete", "pod", "-n", driverNS, "-l", pluginLabel, "--wait=true")
	waitNewPlugin(t, old)
	checkSeededSlicesAdopted(t)
	p := pod(t, "h100-a")
	if p.Status.Phase != "Running" || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("h100-a after plugin restart: %s, restarts %d", p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
	if _, after, _ := gpuOf(t, "h100-a", ""); after != before {
		t.Fatalf("h100-a's GPU changed from %s to %s", before, after)
	}
	specsBefore := len(cdiSpecs())
	deletePods(t, "h100-b")
	waitFor(t, "the new plugin to unprepare h100-b's claim", 60*time.Second, func() (bool, string) {
		return len(cdiSpecs()) == specsBefore-1, strings.Join(cdiSpecs(), " ")
	})
}

// completePool waits until every slice of node 1's pool (this host's,
// whose GPUs the tests count) is there and returns them.
func completePool(t *testing.T) []resourceapi.ResourceSlice {
	var slices []resourceapi.ResourceSlice
	waitFor(t, "all slices of the pool", 30*time.Second, func() (bool, string) {
		list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: node1Slices()})
		if err != nil || len(list.Items) == 0 {
			return false, "none"
		}
		slices = list.Items
		return resourceslices.CompletePool(list.Items), "partial pool"
	})
	return slices
}

// checkSeededSlicesAdopted waits out the resourceslice controller's first
// sync (one second after start) and checks that it rewrote no slice.
func checkSeededSlicesAdopted(t *testing.T) {
	slices := completePool(t)
	time.Sleep(3 * time.Second)
	list, err := client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: node1Slices()})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]string{}
	for _, s := range slices {
		before[s.Name] = s.ResourceVersion
	}
	for _, s := range list.Items {
		if before[s.Name] != s.ResourceVersion || s.Generation != 1 || s.Spec.Pool.Generation != 1 {
			t.Errorf("slice %s was rewritten after the plugin published it (resourceVersion %s -> %s, generation %d, pool generation %d)", s.Name, before[s.Name], s.ResourceVersion, s.Generation, s.Spec.Pool.Generation)
		}
	}
	if len(list.Items) != len(slices) {
		t.Errorf("%d slices after the controller's sync, %d before", len(list.Items), len(slices))
	}
}

func migInstances(t *testing.T) int {
	files, _ := filepath.Glob(filepath.Join(stateDir(), "simulated", "mig-state", "mig-state.*.json"))
	if len(files) == 0 {
		return 0
	}
	data, err := os.ReadFile(files[len(files)-1])
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]struct {
		Instances []json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal(data, &state); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range state {
		n += len(g.Instances)
	}
	return n
}

func testMIG(t *testing.T) {
	apply(t, "05-mig.yaml")
	waitRunning(t, "mig")
	parents, migs := map[string]bool{}, map[string]bool{}
	for _, c := range []string{"big", "medium", "small-1", "small-2"} {
		_, parent, m := gpuOf(t, "mig", c)
		if len(m) != 1 {
			t.Fatalf("container %s sees MIG devices %v, want exactly its own", c, m)
		}
		parents[parent] = true
		migs[m[0]] = true
	}
	if len(parents) != 1 || len(migs) != 4 {
		t.Fatalf("MIG devices %v on parents %v; want 4 on one GPU", migs, parents)
	}
	if n := migInstances(t); n != 4 {
		t.Fatalf("simulated GPUs hold %d MIG instances, want 4", n)
	}
	deletePods(t, "mig")
	waitFor(t, "MIG instances destroyed", 60*time.Second, func() (bool, string) {
		n := migInstances(t)
		return n == 0, string(rune('0' + n))
	})
}

func timeSlice(t *testing.T, uuid string) string {
	data, err := os.ReadFile(filepath.Join(stateDir(), "simulated", "compute-policy", uuid))
	if os.IsNotExist(err) {
		return "Default"
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// testMemoryFraction: pods in two namespaces share one GPU, each with its own
// MPS-enforced memory limit, served by one MPS daemon.
func testMemoryFraction(t *testing.T) {
	apply(t, "06-memory-fraction.yaml")
	waitRunning(t, "fraction-20gi")
	waitFor(t, "fraction-30gi Running", 90*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods("gpu-demo-2").Get(context.Background(), "fraction-30gi", metav1.GetOptions{})
		return err == nil && p.Status.Phase == "Running", "pending"
	})
	_, a, _ := gpuOf(t, "fraction-20gi", "")
	logsA := kubectl(t, "logs", "-n", ns, "fraction-20gi")
	logsB := kubectl(t, "logs", "-n", "gpu-demo-2", "fraction-30gi")
	b := gpuLine.FindStringSubmatch(logsB)
	if b == nil || b[2] != a {
		t.Fatalf("the two shares got different GPUs: %s vs\n%s", a, logsB)
	}
	if !strings.Contains(logsA, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M") || strings.Contains(logsA, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE") {
		t.Fatalf("20Gi share sees:\n%s", logsA)
	}
	if !strings.Contains(logsB, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=30720M") || !strings.Contains(logsB, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50") {
		t.Fatalf("30Gi + 50%% share sees:\n%s", logsB)
	}
	daemon := filepath.Join(stateDir(), "mps", a, "daemon.pid")
	if _, err := os.Stat(daemon); err != nil {
		t.Fatalf("no MPS daemon for the shared GPU: %v", err)
	}
	deletePods(t, "fraction-20gi")
	if _, err := os.Stat(daemon); err != nil {
		t.Fatal("MPS daemon stopped while a share is still running")
	}
	kubectl(t, "delete", "namespace", "gpu-demo-2", "--wait=true")
	waitFor(t, "the MPS daemon to stop with the last share", 60*time.Second, func() (bool, string) {
		_, err := os.Stat(daemon)
		return os.IsNotExist(err), "still there"
	})
}

func testCleanup(t *testing.T) {
	var sharedGPU string
	if _, uuid, _ := gpuOf(t, "shared-1", ""); uuid != "" {
		sharedGPU = uuid
	}
	kubectl(t, "delete", "pods", "--all", "-n", ns, "--wait=true")
	waitFor(t, "no CDI spec and an empty checkpoint", 90*time.Second, func() (bool, string) {
		return len(cdiSpecs()) == 0 && len(checkpointRecords()) == 0, strings.Join(append(cdiSpecs(), checkpointRecords()...), " ")
	})
	if n := migInstances(t); n != 0 {
		t.Fatalf("%d MIG instances left", n)
	}
	if got := timeSlice(t, sharedGPU); got != "Default" {
		t.Fatalf("time slice of %s left at %q after its claim went", sharedGPU, got)
	}
	if left, _ := filepath.Glob(filepath.Join(stateDir(), "mps", "*")); len(left) != 0 {
		t.Fatalf("MPS daemons left: %v", left)
	}
}
