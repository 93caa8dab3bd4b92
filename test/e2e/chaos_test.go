// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e && chaos

// TestChaos churns claims on the local cluster while SIGKILLing the plugin:
// `make chaos` (hack/chaos.sh) runs it; `make e2e` does not (it needs the
// chaos tag as well). Each round creates a mix of pods and claims (two
// whole GPUs, a dynamic-MIG pair in one pod, a time-sliced ResourceClaim
// used by two pods, two memory-fraction pods on the shareable GPU) and
// kills the plugin process while the kubelet prepares them, at a random
// point: when the k-th claim's record appears (k = 0..6), at most 2 s after
// the pods were created. It waits for every pod to run once the kubelet has
// restarted the plugin (its restart back-off included), checks that each
// container saw exactly its own devices, deletes everything and kills the
// plugin again while the kubelet unprepares (when the j-th claim's CDI spec
// is removed, within 20 s). Nothing may be left on the node after a round. Environment:
// CHAOS_ROUNDS (default 3), CHAOS_SEED (default: the time), CHAOS_TIMEOUT
// (per wait, default 10m), CHAOS_STRICT_STATUS=1 (a claim without device
// status in its ResourceClaim fails the run).
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

const chaosNS = "gpu-chaos"

// chaosDevice is what the node's ResourceSlices say about one device.
type chaosDevice struct {
	name, typ, uuid, parentUUID, profile string
	shareable                            bool
}

// chaosView is what a container's nvidia-smi -L and environment showed.
type chaosView struct {
	gpus []string
	migs [][2]string // profile, MIG UUID
	logs string
}

type chaosRun struct {
	t       *testing.T
	ctx     context.Context
	rng     *rand.Rand
	seed    int64
	timeout time.Duration
	devices map[string]chaosDevice

	round, killsPrepare, killsUnprepare, podsRun, containers int
	claimsWithoutStatus                                      int
	killsMidClaim                                            map[string]int
	leftovers                                                []string
	killLog                                                  []string
}

func TestChaos(t *testing.T) {
	rounds, _ := strconv.Atoi(envOr("CHAOS_ROUNDS", "3"))
	seed, _ := strconv.ParseInt(envOr("CHAOS_SEED", strconv.FormatInt(time.Now().UnixNano(), 10)), 10, 64)
	timeout, err := time.ParseDuration(envOr("CHAOS_TIMEOUT", "10m"))
	if err != nil || rounds < 1 {
		t.Fatalf("CHAOS_ROUNDS=%q CHAOS_TIMEOUT=%q: want a positive number and a duration", os.Getenv("CHAOS_ROUNDS"), os.Getenv("CHAOS_TIMEOUT"))
	}
	c := &chaosRun{t: t, ctx: context.Background(), rng: rand.New(rand.NewSource(seed)), seed: seed, timeout: timeout, killsMidClaim: map[string]int{}}
	start := time.Now()
	defer func() { c.summary(rounds, time.Since(start)) }()

	if left := nodeLeftovers(); len(left) != 0 {
		t.Fatalf("the node is not clean before the first round (delete the pods using claims first):\n  %s", strings.Join(left, "\n  "))
	}
	c.devices = c.readDevices()
	c.setUp()
	for c.round = 1; c.round <= rounds; c.round++ {
		c.runRound()
	}
	c.round = rounds
	// One last look after the last round's checks, with the plugin
	// (restarted by the last kill) running for a while.
	time.Sleep(5 * time.Second)
	c.expectClean(fmt.Sprintf("after %d rounds", rounds))
	kubectl(t, "delete", "namespace", chaosNS, "--wait=true")
}

// expectClean fails when the node keeps anything of the driver's once the
// claims are gone. Recovery after a restart may still be finishing, so it
// allows a few seconds.
func (c *chaosRun) expectClean(when string) {
	var left []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		left = nodeLeftovers()
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if len(left) != 0 {
		c.leftovers = append(c.leftovers, left...)
		c.t.Fatalf("left behind %s:\n  %s", when, strings.Join(left, "\n  "))
	}
}

func (c *chaosRun) summary(rounds int, took time.Duration) {
	result := "PASS"
	if c.t.Failed() {
		result = "FAIL"
		rounds = c.round
	}
	fmt.Printf("\nchaos kills:\n  %s\n", strings.Join(c.killLog, "\n  "))
	fmt.Printf("chaos summary: %s rounds=%d kills-during-prepare=%d (mid-claim %d) kills-during-unprepare=%d (mid-claim %d) pods-run=%d containers-checked=%d leftovers=%d claims-without-device-status=%d seed=%d took=%s\n",
		result, rounds, c.killsPrepare, c.killsMidClaim["prepare"], c.killsUnprepare, c.killsMidClaim["unprepare"], c.podsRun, c.containers, len(c.leftovers), c.claimsWithoutStatus, c.seed, took.Round(time.Second))
}

// readDevices maps device names to what the node publishes.
func (c *chaosRun) readDevices() map[string]chaosDevice {
	out := map[string]chaosDevice{}
	str := func(d resourceapi.Device, k resourceapi.QualifiedName) string {
		if a, ok := d.Attributes[k]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	shareable := 0
	for _, s := range completePool(c.t) {
		for _, d := range s.Spec.Devices {
			cd := chaosDevice{name: d.Name, typ: str(d, "type"), uuid: str(d, "uuid"), parentUUID: str(d, "parentUUID"), profile: str(d, "profile"),
				shareable: d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations}
			if cd.shareable {
				shareable++
			}
			out[d.Name] = cd
		}
	}
	if shareable == 0 {
		c.t.Fatal("no GPU is offered for memory fractions; deploy with sharing.fractionalMemory (hack/cluster/deploy.sh does)")
	}
	return out
}

// setUp creates the namespace and the templates every round uses.
func (c *chaosRun) setUp() {
	_ = client.CoreV1().Namespaces().Delete(c.ctx, chaosNS, metav1.DeleteOptions{})
	c.waitFor("namespace "+chaosNS+" gone", func() (bool, string) {
		_, err := client.CoreV1().Namespaces().Get(c.ctx, chaosNS, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "terminating"
	})
	applyYAML(c.t, `
apiVersion: v1
kind: Namespace
metadata: {name: gpu-chaos}
---
`+gpuTemplate("whole-gpu", "gpu-chaos", "!device.allowMultipleAllocations")+`---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mig-pair, namespace: gpu-chaos}
spec:
  spec:
    devices:
      requests:
      - name: small
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]
      - name: medium
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}}]
      constraints:
      - matchAttribute: gpu.nvidia.com/parentUUID
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: fraction-20gi, namespace: gpu-chaos}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          capacity: {requests: {memory: 20Gi}}
          selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: fraction-30gi-half, namespace: gpu-chaos}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          capacity: {requests: {memory: 30Gi, computePercentage: "50"}}
          selectors: [{cel: {expression: "device.allowMultipleAllocations"}}]
`)
	c.waitFor("the default ServiceAccount of "+chaosNS, func() (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(chaosNS).Get(c.ctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
}

const chaosCommand = `nvidia-smi -L; env | grep ^CUDA_MPS | sort; echo chaos-ready; sleep 3600`

// chaosPod is a pod of a round: its claim (by template or by name) and
// which request each container uses.
func chaosPod(name string, round int, template, claim string, containers map[string]string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: chaosNS, Labels: map[string]string{"chaos-round": strconv.Itoa(round)}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			ResourceClaims:                []corev1.PodResourceClaim{{Name: "gpu"}},
		},
	}
	if template != "" {
		p.Spec.ResourceClaims[0].ResourceClaimTemplateName = &template
	} else {
		p.Spec.ResourceClaims[0].ResourceClaimName = &claim
	}
	names := make([]string, 0, len(containers))
	for n := range containers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{
			Name: n, Image: "localhost/busybox:latest", ImagePullPolicy: corev1.PullIfNotPresent,
			Command:   []string{"sh", "-c", chaosCommand},
			Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu", Request: containers[n]}}},
		})
	}
	return p
}

func (c *chaosRun) runRound() {
	t, r := c.t, c.round
	interval := []string{"Short", "Medium", "Long"}[c.rng.Intn(3)]
	tsClaim := fmt.Sprintf("time-sliced-r%d", r)
	var claim resourceapi.ResourceClaim
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(`
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: %s, namespace: gpu-chaos}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors: [{cel: {expression: "!device.allowMultipleAllocations"}}]
    config:
    - opaque:
        driver: gpu.nvidia.com
        parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: %s}}}
`, tsClaim, interval)), &claim); err != nil {
		t.Fatal(err)
	}
	n := func(s string) string { return fmt.Sprintf("%s-r%d", s, r) }
	pods := []*corev1.Pod{
		chaosPod(n("whole-a"), r, "whole-gpu", "", map[string]string{"ctr": ""}),
		chaosPod(n("whole-b"), r, "whole-gpu", "", map[string]string{"ctr": ""}),
		chaosPod(n("mig-pair"), r, "mig-pair", "", map[string]string{"small": "small", "medium": "medium"}),
		chaosPod(n("time-sliced-1"), r, "", tsClaim, map[string]string{"ctr": ""}),
		chaosPod(n("time-sliced-2"), r, "", tsClaim, map[string]string{"ctr": ""}),
		chaosPod(n("fraction-20gi"), r, "fraction-20gi", "", map[string]string{"ctr": ""}),
		chaosPod(n("fraction-30gi"), r, "fraction-30gi-half", "", map[string]string{"ctr": ""}),
	}
	c.rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })

	// Prepare: create, and kill the plugin while the kubelet prepares.
	c.waitPluginUp()
	if _, err := client.ResourceV1().ResourceClaims(chaosNS).Create(c.ctx, &claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(chaosNS).Create(c.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Kill when the k-th claim's PrepareStarted record appears (k = 0: at
	// once, before the kubelet's first call), within 2 s of the creation.
	claims := 6
	k := c.rng.Intn(claims + 1)
	c.killWhen("prepare", 2*time.Second, fmt.Sprintf("at the %d. claim's record", k), func() bool {
		recs, _ := filepath.Glob(filepath.Join(stateDir(), "checkpoint", "*.json"))
		return len(recs) >= k
	})
	c.waitPluginUp()
	for _, p := range pods {
		c.waitRunning(p.Name)
	}
	c.podsRun += len(pods)
	c.checkDevices(n, tsClaim, interval)

	// Unprepare: delete, and kill the plugin while the kubelet unprepares.
	c.waitPluginUp()
	if err := client.CoreV1().Pods(chaosNS).DeleteCollection(c.ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}, metav1.ListOptions{LabelSelector: "chaos-round=" + strconv.Itoa(r)}); err != nil {
		t.Fatal(err)
	}
	if err := client.ResourceV1().ResourceClaims(chaosNS).Delete(c.ctx, tsClaim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Kill when the j-th claim's unprepare removed its CDI spec (its
	// record goes last; j = 0: at once). The kubelet unprepares only once
	// the containers have stopped, a few seconds after the deletion.
	j := c.rng.Intn(claims + 1)
	c.killWhen("unprepare", 20*time.Second, fmt.Sprintf("at the %d. claim's spec removal", j), func() bool { return len(driverCDISpecs()) <= claims-j })
	c.waitPluginUp()
	c.waitFor(fmt.Sprintf("round %d's pods and claims gone and unprepared on the node", r), func() (bool, string) {
		pl, err1 := client.CoreV1().Pods(chaosNS).List(c.ctx, metav1.ListOptions{})
		cl, err2 := client.ResourceV1().ResourceClaims(chaosNS).List(c.ctx, metav1.ListOptions{})
		if err1 != nil || err2 != nil {
			return false, fmt.Sprint(err1, err2)
		}
		specs, recs := driverCDISpecs(), checkpointFiles()
		state := fmt.Sprintf("%d pods, %d claims, %d CDI specs, %d records", len(pl.Items), len(cl.Items), len(specs), len(recs))
		return len(pl.Items) == 0 && len(cl.Items) == 0 && len(specs) == 0 && len(recs) == 0, state
	})
	c.expectClean(fmt.Sprintf("by round %d", r))
	t.Logf("round %d done: %d pods ran with their own devices (time slice %s), nothing left", r, len(pods), interval)
}

// pluginProcess returns the running plugin container's main process: the
// task containerd started for the DaemonSet pod's container (pgrep would
// also match the MPS stand-in daemons, which run the same binary, and any
// plugin a unit test runs on this host).
func (c *chaosRun) pluginProcess() (pid int, container, state string) {
	// This host's pod only: the DaemonSet also makes pods for any other
	// node that registers, and they never run here.
	node := hostNode()
	pods, err := client.CoreV1().Pods(driverNS).List(c.ctx, metav1.ListOptions{LabelSelector: pluginLabel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return 0, "", err.Error()
	}
	if len(pods.Items) != 1 || len(pods.Items[0].Status.ContainerStatuses) != 1 {
		return 0, "", fmt.Sprintf("%d plugin pods on node %s", len(pods.Items), node)
	}
	cs := pods.Items[0].Status.ContainerStatuses[0]
	if cs.State.Running == nil {
		return 0, "", fmt.Sprintf("plugin container not running (restarts %d): %+v", cs.RestartCount, cs.State)
	}
	container = strings.TrimPrefix(cs.ContainerID, "containerd://")
	out, err := exec.Command("ctr", "-n", "k8s.io", "tasks", "ls").CombinedOutput()
	if err != nil {
		return 0, "", fmt.Sprintf("ctr tasks ls: %v: %s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == container && f[2] == "RUNNING" {
			pid, _ = strconv.Atoi(f[1])
		}
	}
	if pid <= 0 {
		return 0, "", "no running task for container " + container
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(cmdline), "\x00")
	if !strings.HasSuffix(args[0], "gpu-kubelet-plugin") || !slices.Contains(args, "--driver-name="+driverName) {
		return 0, "", fmt.Sprintf("pid %d is not the plugin: %q", pid, args)
	}
	return pid, container, ""
}

func (c *chaosRun) waitPluginUp() (pid int) {
	c.waitFor("the plugin process", func() (bool, string) {
		var state string
		pid, _, state = c.pluginProcess()
		return pid > 0, state
	})
	return pid
}

// killWhen SIGKILLs the plugin process as soon as ready() holds or limit
// has passed, and records how far the node had got when it died.
func (c *chaosRun) killWhen(phase string, limit time.Duration, trigger string, ready func() bool) {
	pid, container, state := c.pluginProcess()
	if pid == 0 {
		c.t.Fatalf("round %d: no plugin process to kill during %s: %s", c.round, phase, state)
	}
	since := time.Now()
	for !ready() && time.Since(since) < limit {
		time.Sleep(2 * time.Millisecond)
	}
	if !ready() {
		trigger += fmt.Sprintf(" (not reached: at %s)", limit)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		c.t.Fatalf("kill -9 %d: %v", pid, err)
	}
	at, killed := time.Since(since), time.Now()
	// What the dead process left: it no longer writes once it is gone.
	for time.Since(killed) < 2*time.Second {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil || strings.Contains(string(stat), ") Z ") {
			break
		}
		time.Sleep(time.Millisecond)
	}
	started, completed := chaosRecordStates()
	specs := len(driverCDISpecs())
	mid := false
	switch phase {
	case "prepare":
		c.killsPrepare++
		mid = started > 0
	case "unprepare":
		c.killsUnprepare++
		mid = specs < started+completed
	}
	if mid {
		c.killsMidClaim[phase]++
	}
	c.waitFor("the killed plugin to restart", func() (bool, string) {
		p, ctr, state := c.pluginProcess()
		return p > 0 && ctr != container, state
	})
	line := fmt.Sprintf("round %d %-9s kill -9 %d at +%.3fs %s: left PrepareStarted=%d PrepareCompleted=%d records, %d CDI specs (mid-claim: %v); plugin back after %.1fs",
		c.round, phase, pid, at.Seconds(), trigger, started, completed, specs, mid, time.Since(killed).Seconds())
	c.killLog = append(c.killLog, line)
	c.t.Log(line)
}

func (c *chaosRun) waitFor(what string, cond func() (bool, string)) {
	c.t.Helper()
	deadline := time.Now().Add(c.timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.diagnostics()
			c.t.Fatalf("round %d: timed out after %s waiting for %s; last state: %s", c.round, c.timeout, what, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (c *chaosRun) waitRunning(name string) {
	c.t.Helper()
	c.waitFor("pod "+name+" Running", func() (bool, string) {
		p, err := client.CoreV1().Pods(chaosNS).Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
}

// diagnostics prints what explains a timeout: pods that are not running,
// their events, and the plugin's logs.
func (c *chaosRun) diagnostics() {
	if pl, err := client.CoreV1().Pods(chaosNS).List(c.ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pl.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				continue
			}
			c.t.Logf("pod %s: %s (deleting: %v)", p.Name, p.Status.Phase, p.DeletionTimestamp != nil)
			if ev, err := client.CoreV1().Events(chaosNS).List(c.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name}); err == nil {
				for _, e := range ev.Items {
					c.t.Logf("  %s %s: %s", e.Type, e.Reason, e.Message)
				}
			}
		}
	}
	for _, prev := range []string{"--previous", ""} {
		args := []string{"logs", "-n", driverNS, "-l", pluginLabel, "--tail=40"}
		if prev != "" {
			args = append(args, prev)
		}
		out, _ := exec.Command("kubectl", args...).CombinedOutput()
		c.t.Logf("plugin logs %s:\n%s", prev, out)
	}
	c.t.Logf("on the node: %v", nodeLeftovers())
}

// view waits for a container's nvidia-smi output and parses it.
func (c *chaosRun) view(pod, container string) chaosView {
	var v chaosView
	c.waitFor("nvidia-smi output of "+pod+"/"+container, func() (bool, string) {
		b, err := client.CoreV1().Pods(chaosNS).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(c.ctx)
		v.logs = string(b)
		return err == nil && strings.Contains(v.logs, "chaos-ready"), fmt.Sprint(err, v.logs)
	})
	for _, m := range gpuLine.FindAllStringSubmatch(v.logs, -1) {
		v.gpus = append(v.gpus, m[2])
	}
	for _, m := range migLine.FindAllStringSubmatch(v.logs, -1) {
		v.migs = append(v.migs, [2]string{m[1], m[2]})
	}
	c.containers++
	return v
}

// allocation returns the claim a pod uses and its devices by request.
func (c *chaosRun) allocation(podName string) (*resourceapi.ResourceClaim, map[string]chaosDevice) {
	p, err := client.CoreV1().Pods(chaosNS).Get(c.ctx, podName, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	name := ""
	if rc := p.Spec.ResourceClaims[0]; rc.ResourceClaimName != nil {
		name = *rc.ResourceClaimName
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == "gpu" && s.ResourceClaimName != nil {
			name = *s.ResourceClaimName
		}
	}
	claim, err := client.ResourceV1().ResourceClaims(chaosNS).Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatalf("claim of pod %s: %v", podName, err)
	}
	if claim.Status.Allocation == nil {
		c.t.Fatalf("claim %s of running pod %s is not allocated", name, podName)
	}
	out := map[string]chaosDevice{}
	for _, res := range claim.Status.Allocation.Devices.Results {
		if res.Driver != driverName {
			continue
		}
		d, ok := c.devices[res.Device]
		if !ok {
			c.t.Fatalf("claim %s got %s, which the node does not publish", name, res.Device)
		}
		if _, dup := out[res.Request]; dup {
			c.t.Fatalf("claim %s has two devices for request %s", name, res.Request)
		}
		out[res.Request] = d
	}
	return claim, out
}

// checkDevices compares what every container saw with its claim's
// allocation, with the other pods, and with the node's sharing state.
func (c *chaosRun) checkDevices(n func(string) string, tsClaim, interval string) {
	t := c.t
	fail := func(format string, args ...any) {
		t.Helper()
		c.diagnostics()
		t.Fatalf("round %d: "+format, append([]any{c.round}, args...)...)
	}
	// Expected UUID per claim and device, for the device status check.
	type devKey struct{ claim, device string }
	expect := map[devKey]string{}
	claims := map[string]*resourceapi.ResourceClaim{}
	exclusive := map[string]string{} // GPU UUID -> holder

	hold := func(uuid, holder string) {
		if other, ok := exclusive[uuid]; ok {
			fail("%s and %s were both given GPU %s", other, holder, uuid)
		}
		exclusive[uuid] = holder
	}
	onlyGPU := func(pod, ctr string, v chaosView, want string) {
		if len(v.gpus) != 1 || v.gpus[0] != want || len(v.migs) != 0 {
			fail("%s/%s sees GPUs %v and MIG devices %v, want exactly %s:\n%s", pod, ctr, v.gpus, v.migs, want, v.logs)
		}
	}

	// Whole GPUs.
	for _, p := range []string{n("whole-a"), n("whole-b")} {
		claim, devs := c.allocation(p)
		d := devs["gpu"]
		if len(devs) != 1 || d.typ != "gpu" || d.uuid == "" || d.shareable {
			fail("claim %s of %s: allocation %v, want one exclusive GPU", claim.Name, p, devs)
		}
		onlyGPU(p, "ctr", c.view(p, "ctr"), d.uuid)
		hold(d.uuid, "claim "+claim.Name)
		claims[claim.Name], expect[devKey{claim.Name, d.name}] = claim, d.uuid
	}

	// The MIG pair: two MIG devices of one GPU, each container sees its own.
	{
		p := n("mig-pair")
		claim, devs := c.allocation(p)
		if len(devs) != 2 {
			fail("claim %s: allocation %v, want two MIG devices", claim.Name, devs)
		}
		seen := map[string]bool{}
		for _, req := range []string{"small", "medium"} {
			d := devs[req]
			if d.typ != "mig" || d.parentUUID == "" {
				fail("claim %s request %s got %+v, want a MIG device", claim.Name, req, d)
			}
			v := c.view(p, req)
			if len(v.gpus) != 1 || v.gpus[0] != d.parentUUID || len(v.migs) != 1 || v.migs[0][0] != d.profile || seen[v.migs[0][1]] {
				fail("%s/%s sees GPUs %v and MIG devices %v; want exactly one %s on %s (allocated %s):\n%s", p, req, v.gpus, v.migs, d.profile, d.parentUUID, d.name, v.logs)
			}
			seen[v.migs[0][1]] = true
			expect[devKey{claim.Name, d.name}] = v.migs[0][1]
		}
		if devs["small"].parentUUID != devs["medium"].parentUUID {
			fail("MIG pair on two GPUs: %+v", devs)
		}
		hold(devs["small"].parentUUID, "claim "+claim.Name+" (MIG)")
		claims[claim.Name] = claim
	}

	// The time-sliced claim: both pods see its GPU, with the interval set.
	{
		var uuid string
		for _, p := range []string{n("time-sliced-1"), n("time-sliced-2")} {
			claim, devs := c.allocation(p)
			d := devs["gpu"]
			if claim.Name != tsClaim || len(devs) != 1 || d.typ != "gpu" || d.shareable {
				fail("pod %s: claim %s allocation %v, want %s with one exclusive GPU", p, claim.Name, devs, tsClaim)
			}
			onlyGPU(p, "ctr", c.view(p, "ctr"), d.uuid)
			uuid = d.uuid
			claims[claim.Name], expect[devKey{claim.Name, d.name}] = claim, d.uuid
		}
		hold(uuid, "claim "+tsClaim+" (time-sliced)")
		if got := timeSliceOf(uuid); got != interval {
			fail("time slice of %s is %q while %s is prepared, want %s", uuid, got, tsClaim, interval)
		}
	}

	// Memory fractions: both on the shareable GPU, each with its limits,
	// one running MPS daemon for the GPU.
	{
		var uuids []string
		for _, f := range []struct{ pod, env string }{
			{n("fraction-20gi"), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=20480M"},
			{n("fraction-30gi"), "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=30720M\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50"},
		} {
			claim, devs := c.allocation(f.pod)
			d := devs["gpu"]
			if len(devs) != 1 || !d.shareable {
				fail("claim %s of %s: allocation %v, want a share of the shareable GPU", claim.Name, f.pod, devs)
			}
			v := c.view(f.pod, "ctr")
			onlyGPU(f.pod, "ctr", v, d.uuid)
			for _, e := range strings.Split(f.env, "\n") {
				if !strings.Contains(v.logs, e) {
					fail("%s does not see %s:\n%s", f.pod, e, v.logs)
				}
			}
			uuids = append(uuids, d.uuid)
			claims[claim.Name], expect[devKey{claim.Name, d.name}] = claim, d.uuid
		}
		if uuids[0] != uuids[1] {
			fail("memory fractions on %v, want one GPU", uuids)
		}
		if holder, ok := exclusive[uuids[0]]; ok {
			fail("the shared GPU %s is also held exclusively by %s", uuids[0], holder)
		}
		c.waitFor("the MPS daemon of "+uuids[0], func() (bool, string) {
			pid := chaosDaemonPID(uuids[0])
			return pid > 0 && syscall.Kill(pid, 0) == nil, fmt.Sprintf("daemon pid %d", pid)
		})
	}

	// Device status: where the plugin wrote it, it names the same devices.
	// A claim without it is counted, and fails the run only with
	// CHAOS_STRICT_STATUS=1: the write is asynchronous, and a claim whose
	// prepare completed just before a kill may never get it.
	deadline := time.Now().Add(10 * time.Second)
	for name := range claims {
		for {
			claim, err := client.ResourceV1().ResourceClaims(chaosNS).Get(c.ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			written := 0
			for _, s := range claim.Status.Devices {
				want, ok := expect[devKey{name, s.Device}]
				if s.Driver != driverName || !ok || s.Data == nil {
					continue
				}
				var data struct {
					UUID string `json:"uuid"`
				}
				if err := json.Unmarshal(s.Data.Raw, &data); err != nil || data.UUID != want {
					fail("claim %s device %s: status says %s, the container saw %s", name, s.Device, s.Data.Raw, want)
				}
				written++
			}
			if written == len(claim.Status.Allocation.Devices.Results) {
				break
			}
			if time.Now().After(deadline) {
				c.claimsWithoutStatus++
				if os.Getenv("CHAOS_STRICT_STATUS") == "1" {
					fail("claim %s has device status for %d of %d devices", name, written, len(claim.Status.Allocation.Devices.Results))
				}
				t.Logf("round %d: claim %s has device status for %d of %d devices", c.round, name, written, len(claim.Status.Allocation.Devices.Results))
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
}

func chaosRecordStates() (started, completed int) {
	recs, _ := filepath.Glob(filepath.Join(stateDir(), "checkpoint", "*.json"))
	for _, r := range recs {
		var f struct {
			Claim struct {
				State string `json:"state"`
			} `json:"claim"`
		}
		data, err := os.ReadFile(r)
		if err != nil || json.Unmarshal(data, &f) != nil {
			continue
		}
		switch f.Claim.State {
		case "PrepareStarted":
			started++
		case "PrepareCompleted":
			completed++
		}
	}
	return started, completed
}

func chaosDaemonPID(uuid string) int {
	data, err := os.ReadFile(filepath.Join(stateDir(), "mps", uuid, "daemon.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}
