// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The pending explainer at fleet scale (issue 23; hack/bench-explain.sh).
// On the same throw-away control plane and fleet as the scheduling
// benchmark, the webhook binary runs as a process with its explainer on,
// and for one Pending pod per case this measures how long after the
// scheduler marks the pod Unschedulable the explainer's Event appears, the
// webhook's CPU and memory, and `gpudra diagnose pod` on the same pod.
// Only binaries run, so any version of pkg/pendingexplainer is measured.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/ptr"
)

// explainReason is pendingexplainer.Reason; a test keeps them equal
// without linking the scheduler's libraries into this binary.
const explainReason = "DeviceTaintsBlockScheduling"

// syncedMarker is what the explainer logs once its caches have synced
// (pkg/pendingexplainer Run); idle memory is read after it.
const syncedMarker = "Explaining pods that device taints keep Pending"

type explainOptions struct {
	webhook, gpudra      string
	idle, quiet, timeout time.Duration
}

// diagnoseRuns of gpudra diagnose per pod; the table shows the middle one.
const diagnoseRuns = 3

func addExplainFlags(fs *flag.FlagSet) *explainOptions {
	x := &explainOptions{}
	fs.StringVar(&x.webhook, "explain-webhook", "", "measure the pending explainer of this gpu-dra-webhook binary instead of scheduling (hack/bench-explain.sh)")
	fs.StringVar(&x.gpudra, "explain-gpudra", "", "gpudra binary whose `diagnose pod` is timed on each Pending pod")
	fs.DurationVar(&x.idle, "explain-idle", 10*time.Second, "wait after the explainer's caches synced before reading its idle memory")
	fs.DurationVar(&x.quiet, "explain-quiet", 15*time.Second, "how long the untainted case waits for an Event that should not come")
	fs.DurationVar(&x.timeout, "explain-timeout", 60*time.Second, "give up waiting for Unschedulable or for the tainted case's Event after this")
	return x
}

// explainResult is one case at one fleet size, in seconds and MiB. The
// webhook's CPU is from the pod's create to its Event plus 1 s (or to the
// end of -explain-quiet); its idle memory is read -explain-idle after its
// caches synced. EventSec is -1 when no Event came (JSON has no NaN).
type explainResult struct {
	Layout, Case, Event, Verdict string
	Nodes, DiagExit              int
	SyncSec, SyncCPU             float64 // webhook start to the explainer's caches synced
	RSSIdle, HWMIdle             float64
	EventSec, CPU, RSS, HWM      float64
	DiagWall, DiagRSS            float64
	NamesTaint                   bool // the verdict names the unhealthy taint
}

func runExplain(ctx context.Context, o options, x *explainOptions) error {
	// The webhook's log is in -work-dir; the caller decides when it goes.
	if o.k8sBin == "" || o.etcdBin == "" || o.plugin == "" || o.classes == "" || x.gpudra == "" || o.workDir == "" {
		return errors.New("-k8s-bin, -etcd-bin, -plugin, -deviceclasses, -work-dir and -explain-gpudra are required")
	}
	classes, err := deviceClasses(o.classes)
	if err != nil {
		return err
	}
	var results []explainResult
	for _, ln := range split(o.layouts) {
		i := slices.IndexFunc(layouts(), func(l layout) bool { return l.name == ln })
		if i < 0 {
			return fmt.Errorf("-layouts: unknown %q", ln)
		}
		l := layouts()[i]
		tmpl, err := pluginSlices(o.plugin, o.profile, l)
		if err != nil {
			return err
		}
		for _, s := range split(o.nodes) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return fmt.Errorf("-nodes %q", s)
			}
			rs, err := explainCell(ctx, o, x, l, tmpl, classes, n)
			results = append(results, rs...)
			// What was measured is kept even when a later step fails.
			if err = errors.Join(err, writeExplain(o, results)); err != nil {
				return err
			}
		}
	}
	fmt.Print(explainMarkdown(results))
	return nil
}

// explainCell runs both cases on one fleet and one webhook process:
// untainted first, as the tainted case's taint stays.
func explainCell(ctx context.Context, o options, x *explainOptions, l layout, tmpl []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass, n int) ([]explainResult, error) {
	c, cs, err := startFleet(ctx, o, fmt.Sprintf("explain-%s-%d", l.name, n), l, tmpl, classes, n)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	dir := c.cfg.dir
	time.Sleep(3 * time.Second) // the scheduler's informers take the last slices
	// The webhook needs a serving pair to start; nothing calls /validate.
	crt, key, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", nil, nil)
	if err != nil {
		return nil, err
	}
	logFile := filepath.Join(dir, "gpu-dra-webhook.log")
	for f, b := range map[string][]byte{"webhook.crt": crt, "webhook.key": key} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			return nil, err
		}
	}
	t := time.Now()
	p, err := startProc("gpu-dra-webhook", x.webhook, []string{
		"--kubeconfig=" + c.kubeconfig, "--listen=127.0.0.1:0", // any free port
		"--tls-cert-file=" + filepath.Join(dir, "webhook.crt"), "--tls-private-key-file=" + filepath.Join(dir, "webhook.key"),
		// The explainer's Lease lives in the benchmark's namespace.
		"--leader-election-namespace=" + namespace, "--leader-election-identity=bench",
	}, logFile)
	if err != nil {
		return nil, err
	}
	c.procs[p.name] = p // for procStats; cluster.stop does not stop it
	defer p.stop()
	for b, _ := os.ReadFile(logFile); !bytes.Contains(b, []byte(syncedMarker)); b, _ = os.ReadFile(logFile) {
		if p.exited() || time.Since(t) > 5*time.Minute || ctx.Err() != nil {
			return nil, fmt.Errorf("the webhook did not log %q; see %s", syncedMarker, logFile)
		}
		time.Sleep(100 * time.Millisecond)
	}
	base := explainResult{Layout: l.name, Nodes: n, SyncSec: time.Since(t).Seconds()}
	_, base.SyncCPU = c.procStats(p.name)
	time.Sleep(x.idle)
	base.RSSIdle, base.HWMIdle = procMem(p.cmd.Process.Pid)
	logf("%s/%d: explainer synced in %.1f s (%.2f CPU s); idle RSS %.0f MiB, VmHWM %.0f MiB", l.name, n, base.SyncSec, base.SyncCPU, base.RSSIdle, base.HWMIdle)
	// Untainted: no GPU has index 9, so the pod fits nowhere, and no
	// taint is to blame.
	r, err := explainCase(ctx, c, cs, x, base, "untainted", nodeName(n-1), 9)
	out := []explainResult{r}
	if err == nil {
		err = cleanup(ctx, cs, o.workers)
	}
	if err != nil {
		return out, err
	}
	tainted, err := taintGPU(ctx, cs, nodeName(0), 1)
	if err != nil {
		return out, err
	}
	logf("%s/%d: %d devices of GPU 1 on %s tainted", l.name, n, tainted, nodeName(0))
	// The explainer gathers slice changes for 2 s before a pass over all
	// Pending pods (none here): that pass is not the case's.
	time.Sleep(4 * time.Second)
	r, err = explainCase(ctx, c, cs, x, base, "tainted", nodeName(0), 1)
	if err == nil {
		// The fleet view on the same fleet, one GPU tainted (issue 31).
		err = timeFleetCommands(ctx, cs, x.gpudra, c.kubeconfig, n)
	}
	return append(out, r), err
}

// explainCase creates a pod pinned to node whose claim asks for its GPU
// of this index, and measures from the scheduler's Unschedulable to the
// explainer's Event.
func explainCase(ctx context.Context, c *cluster, cs kubernetes.Interface, x *explainOptions, r explainResult, name, node string, index int) (explainResult, error) {
	r.Case, r.EventSec = name, -1
	pod := "explain-" + name
	podW, err := cs.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod})
	if err != nil {
		return r, err
	}
	defer podW.Stop()
	unsched := firstMatch(podW, func(o any) bool {
		p, ok := o.(*corev1.Pod)
		return ok && slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		})
	})
	evW, err := cs.EventsV1().Events(namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	defer evW.Stop()
	var note string // written before the channel send, read after it
	event := firstMatch(evW, func(o any) bool {
		if e, ok := o.(*eventsv1.Event); ok && e.Reason == explainReason && e.Regarding.Name == pod {
			note = e.Note
		}
		return note != ""
	})
	_, cpu0 := c.procStats("gpu-dra-webhook")
	sel := resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.attributes['gpu.nvidia.com'].index == %d", index)}}
	req := resourceapi.DeviceRequest{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com",
		AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, Selectors: []resourceapi.DeviceSelector{sel}}}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: pod},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}}
	if _, err := cs.ResourceV1().ResourceClaims(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod}, Spec: corev1.PodSpec{
		AutomountServiceAccountToken: ptr.To(false), TerminationGracePeriodSeconds: ptr.To[int64](0),
		NodeSelector:   map[string]string{"kubernetes.io/hostname": node}, // createFleet's nodes carry it
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(pod)}},
		Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10.2",
			Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
	}}
	if _, err := cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return r, err
	}
	var tU time.Time
	select {
	case tU = <-unsched:
	case <-time.After(x.timeout):
		return r, fmt.Errorf("pod %s not Unschedulable after %s", pod, x.timeout)
	}
	wait := x.quiet
	if name == "tainted" {
		wait = x.timeout
	}
	select {
	case tE := <-event:
		// The explainer watches the pod too, and may act before this
		// watch delivers the condition: never below zero.
		r.EventSec, r.Event = max(tE.Sub(tU).Seconds(), 0), note
		time.Sleep(time.Second) // the tail of the work: the Event's own API call
	case <-time.After(wait):
	}
	_, cpu1 := c.procStats("gpu-dra-webhook")
	r.CPU = cpu1 - cpu0
	r.RSS, r.HWM = procMem(c.procs["gpu-dra-webhook"].cmd.Process.Pid)
	if err := diagnosePod(ctx, x, c.kubeconfig, pod, &r); err != nil {
		return r, err
	}
	logf("%d/%s: Event after %.3f s (-1: none), webhook %.2f CPU s, RSS %.0f MiB (VmHWM %.0f); diagnose %.2f s, %.0f MiB, exit %d: %s",
		r.Nodes, name, r.EventSec, r.CPU, r.RSS, r.HWM, r.DiagWall, r.DiagRSS, r.DiagExit, r.Verdict)
	return r, ctx.Err()
}

// firstMatch reports when the first watch event whose object matches
// arrives, then stops the watch.
func firstMatch(w watch.Interface, match func(any) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if (ev.Type == watch.Added || ev.Type == watch.Modified) && match(ev.Object) {
				ch <- time.Now()
				return
			}
		}
	}()
	return ch
}

// diagnosePod runs `gpudra diagnose pod` as a user would, and keeps the
// middle run's wall time and peak RSS (getrusage, KiB on Linux).
func diagnosePod(ctx context.Context, x *explainOptions, kubeconfig, pod string, r *explainResult) error {
	var walls, rss []float64
	for range diagnoseRuns {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, x.gpudra, "diagnose", "pod", namespace+"/"+pod, "--kubeconfig="+kubeconfig)
		cmd.Stdout, cmd.Stderr = &out, &out
		t := time.Now()
		// Exit 1 (cause found) is what a Pending pod gets; 2 (could not
		// tell) is reported, not fatal.
		if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
			return fmt.Errorf("gpudra diagnose: %w", err)
		}
		walls = append(walls, time.Since(t).Seconds())
		rss = append(rss, float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)/1024)
		r.DiagExit = cmd.ProcessState.ExitCode()
		lines := strings.SplitN(out.String(), "\n", 3)
		r.Verdict = lines[min(1, len(lines)-1)] // after "STATUS: target"
	}
	sort.Float64s(walls)
	sort.Float64s(rss)
	r.DiagWall, r.DiagRSS = walls[len(walls)/2], rss[len(rss)/2]
	r.NamesTaint = strings.Contains(r.Verdict, "gpu.nvidia.com/unhealthy")
	return nil
}

// procMem reads VmRSS and VmHWM (the peak RSS) of pid, in MiB.
func procMem(pid int) (rss, hwm float64) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(l, "VmRSS: %f kB", &kb); err == nil {
			rss = kb / 1024
		} else if _, err := fmt.Sscanf(l, "VmHWM: %f kB", &kb); err == nil {
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

func writeExplain(o options, rs []explainResult) error {
	b, _ := json.MarshalIndent(rs, "", "  ") // plain values: no error
	for f, data := range map[string][]byte{o.jsonOut: b, o.out: []byte(explainMarkdown(rs))} {
		if f != "" {
			if err := os.WriteFile(f, data, 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// explainMarkdown is the table; the verdicts are in the JSON and the log.
func explainMarkdown(rs []explainResult) string {
	var b strings.Builder
	b.WriteString("| layout | nodes | case | Unschedulable → Event | webhook CPU | webhook RSS idle / after / VmHWM | webhook start → synced (CPU) | diagnose wall p50 | diagnose max RSS p50 | verdict names taint |\n")
	b.WriteString("|---|---:|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		ev := "none"
		if r.EventSec >= 0 {
			ev = fmt.Sprintf("%.0f ms", r.EventSec*1e3)
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %.2f s | %.0f / %.0f / %.0f MiB | %.1f s (%.2f s) | %.2f s | %.0f MiB | %v (exit %d) |\n", r.Layout, r.Nodes, r.Case,
			ev, r.CPU, r.RSSIdle, r.RSS, r.HWM, r.SyncSec, r.SyncCPU, r.DiagWall, r.DiagRSS, r.NamesTaint, r.DiagExit)
	}
	return b.String()
}
