// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command benchscale measures how fast a real kube-scheduler binds pods that
// ask for GPUs through DRA, over a fleet of kubelet-less Nodes whose
// ResourceSlices are exactly what the GPU kubelet plugin publishes
// (its --print-slices output, with only the node and pool renamed).
// For each layout and fleet size it starts its own etcd, kube-apiserver and
// kube-scheduler (and, for ResourceClaimTemplates, a kube-controller-manager
// running only the resourceclaim controller), creates the fleet, then
// creates pods as fast as concurrent clients can and times them from the
// first create to the last bind. hack/bench-scale.sh is the entry point.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
)

type options struct {
	k8sBin, etcdBin, plugin, classes, profile       string
	scheduler                                       string
	gates, workDir, out, jsonOut                    string
	layouts, nodes, modes, podsPerNode, fills       string
	repeats, workers, schedQPS, profileSecs, schedV int
	pctScore, maxPods                               int
	profileCell                                     string
	stall                                           time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.k8sBin, "k8s-bin", "", "directory with kube-apiserver, kube-scheduler, kube-controller-manager")
	flag.StringVar(&o.scheduler, "scheduler", "", "kube-scheduler binary to run instead of -k8s-bin's (hack/build-patched-scheduler.sh builds one with hack/allocator's patches)")
	flag.StringVar(&o.etcdBin, "etcd-bin", "", "directory with etcd")
	flag.StringVar(&o.plugin, "plugin", "", "gpu-kubelet-plugin binary (its --print-slices makes each node's slices)")
	flag.StringVar(&o.profile, "simulate", "h100x8", "simulated GPU profile of every node")
	flag.StringVar(&o.classes, "deviceclasses", "", "YAML with the chart's DeviceClasses (helm template output)")
	flag.StringVar(&o.gates, "feature-gates", "", "feature gates of every component (empty: the Kubernetes defaults; hack/bench-scale.sh GATES)")
	flag.StringVar(&o.workDir, "work-dir", "", "state and logs (a temporary directory when empty)")
	flag.StringVar(&o.out, "out", "", "write the markdown table here too")
	flag.StringVar(&o.jsonOut, "json", "", "write every run's result here as JSON")
	flag.StringVar(&o.layouts, "layouts", "whole,mig-1g,mig-whole,frac-20gi", "layouts to run")
	flag.StringVar(&o.nodes, "nodes", "100,500", "fleet sizes")
	flag.StringVar(&o.modes, "modes", "claims,templates", "claims (pre-created ResourceClaims) and/or templates (ResourceClaimTemplates)")
	flag.StringVar(&o.podsPerNode, "pods-per-node", "whole=6,mig-1g=6,mig-whole=6,frac-20gi=6", "pods per node of each layout (layout=n,...)")
	flag.StringVar(&o.fills, "fills", "0", "fill levels: percent of what a node can hold of the layout's claims, allocated before the timed pods (fill.go)")
	flag.IntVar(&o.pctScore, "percentage-of-nodes-to-score", 0, "the scheduler's percentageOfNodesToScore (0: its default, adaptive)")
	flag.IntVar(&o.maxPods, "max-timed-pods", 0, "at most this many timed pods per run (0: no limit), for slow cells")
	flag.IntVar(&o.repeats, "repeats", 3, "runs per cell; the table shows medians")
	flag.IntVar(&o.workers, "workers", 32, "concurrent API calls when creating objects")
	flag.IntVar(&o.schedQPS, "scheduler-qps", 5000, "kube-scheduler clientConnection qps and burst")
	flag.IntVar(&o.schedV, "scheduler-v", 0, "kube-scheduler log verbosity")
	flag.DurationVar(&o.stall, "stall", 90*time.Second, "give a run up when no pod was bound for this long")
	flag.StringVar(&o.profileCell, "cpuprofile", "", "layout/nodes/mode whose first run also takes CPU profiles of the scheduler and the API server (e.g. mig-1g/500/claims)")
	flag.IntVar(&o.profileSecs, "cpuprofile-seconds", 20, "length of that profile")
	x := addExplainFlags(flag.CommandLine) // the pending explainer instead (explain.go)
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var err error
	if x.webhook != "" {
		err = runExplain(ctx, o, x)
	} else {
		err = run(ctx, o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchscale:", err)
		os.Exit(1)
	}
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(ctx context.Context, o options) error {
	if o.k8sBin == "" || o.etcdBin == "" || o.plugin == "" || o.classes == "" {
		return fmt.Errorf("-k8s-bin, -etcd-bin, -plugin and -deviceclasses are required")
	}
	perNode := map[string]int{}
	for _, kv := range split(o.podsPerNode) {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 110 {
			return fmt.Errorf("-pods-per-node %q: want layout=1..110", kv)
		}
		perNode[k] = n
	}
	var sizes []int
	for _, s := range split(o.nodes) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("-nodes %q", s)
		}
		sizes = append(sizes, n)
	}
	var fills []int
	for _, s := range split(o.fills) {
		f, err := strconv.Atoi(s)
		if err != nil || f < 0 || f > 99 || (len(fills) > 0 && f <= fills[len(fills)-1]) {
			return fmt.Errorf("-fills %q: want ascending percentages 0..99", o.fills)
		}
		fills = append(fills, f)
	}
	modes := split(o.modes)
	for _, m := range modes {
		if m != "claims" && m != "templates" {
			return fmt.Errorf("-modes: unknown %q", m)
		}
	}
	all := map[string]layout{}
	for _, l := range layouts() {
		all[l.name] = l
	}
	classes, err := deviceClasses(o.classes)
	if err != nil {
		return err
	}
	if o.workDir == "" {
		if o.workDir, err = os.MkdirTemp("", "gdra-bench-scale."); err != nil {
			return err
		}
		defer os.RemoveAll(o.workDir)
	}
	var results []runResult
	t0 := time.Now()
	for _, ln := range split(o.layouts) {
		l, ok := all[ln]
		if !ok {
			return fmt.Errorf("-layouts: unknown %q", ln)
		}
		ppn := perNode[ln]
		if ppn == 0 {
			ppn = 6
		}
		tmpl, err := pluginSlices(o.plugin, o.profile, l)
		if err != nil {
			return err
		}
		devs := 0
		for _, s := range tmpl {
			devs += len(s.Spec.Devices)
		}
		fill, err := planFill(tmpl, classes, l)
		if err != nil {
			return err
		}
		logf("%s: a node holds %d such claims", ln, fill.capacity())
		for _, n := range sizes {
			rs, err := runCell(ctx, o, cellSpec{l: l, tmpl: tmpl, classes: classes, n: n, ppn: ppn, modes: modes, fill: fill, fills: fills})
			results = append(results, rs...)
			if werr := writeResults(o, results); werr != nil {
				return werr
			}
			if err != nil {
				return fmt.Errorf("%s/%d: %w", ln, n, err)
			}
			logf("%s/%d done (%d slices, %d devices per node); %.0f s so far", ln, n, len(tmpl), devs, time.Since(t0).Seconds())
		}
	}
	fmt.Print(markdown(results))
	return nil
}

// writeResults writes the JSON and the markdown table of the runs so far, so
// that an interrupted benchmark leaves what it measured.
func writeResults(o options, results []runResult) error {
	if o.jsonOut != "" {
		// JSON has no NaN or Inf: no samples is 0, above the histogram's
		// last finite bucket (22 ms) is -1.
		clean := make([]runResult, len(results))
		for i, r := range results {
			for _, f := range []*float64{&r.FilterP50, &r.FilterP99, &r.FilterMean, &r.PreBindP50, &r.PreBindMean} {
				if math.IsNaN(*f) {
					*f = 0
				} else if math.IsInf(*f, 0) {
					*f = -1
				}
			}
			clean[i] = r
		}
		b, err := json.MarshalIndent(clean, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	if o.out != "" {
		return os.WriteFile(o.out, []byte(markdown(results)), 0o644)
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// startFleet starts a control plane in o.workDir/name and creates an
// n-node fleet of l's slices on it; the caller stops the cluster.
func startFleet(ctx context.Context, o options, name string, l layout, tmpl []*resourceapi.ResourceSlice, classes []*resourceapi.DeviceClass, n int) (*cluster, kubernetes.Interface, error) {
	c, err := startCluster(ctx, clusterConfig{k8sBin: o.k8sBin, scheduler: o.scheduler, etcdBin: o.etcdBin, dir: filepath.Join(o.workDir, name), gates: o.gates, schedQPS: o.schedQPS, schedV: o.schedV, pctScore: o.pctScore})
	if err != nil {
		return nil, nil, err
	}
	cs, err := c.client(5000, 5000)
	if err == nil {
		t := time.Now()
		if err = createFleet(ctx, cs, classes, tmpl, n, o.workers); err == nil {
			logf("%s/%d: fleet of %d nodes created in %.1f s", l.name, n, n, time.Since(t).Seconds())
			return c, cs, nil
		}
	}
	c.stop()
	return nil, nil, err
}

// cellSpec is one layout at one fleet size.
type cellSpec struct {
	l       layout
	tmpl    []*resourceapi.ResourceSlice
	classes []*resourceapi.DeviceClass
	n, ppn  int
	modes   []string
	fill    nodeFill
	fills   []int
}

// runCell starts a control plane and creates an n-node fleet; then, for
// each fill level in turn, adds the fill claims and runs every mode
// o.repeats times, cleaning up the timed pods between runs.
func runCell(ctx context.Context, o options, cell cellSpec) ([]runResult, error) {
	l, n := cell.l, cell.n
	c, cs, err := startFleet(ctx, o, fmt.Sprintf("%s-%d", l.name, n), l, cell.tmpl, cell.classes, n)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	var out []runResult
	held := 0
	for _, fill := range cell.fills {
		t := time.Now()
		next := cell.fill.held(fill)
		if err := addFill(ctx, cs, l, cell.fill, n, held, next, o.workers); err != nil {
			return out, err
		}
		if next > held {
			logf("%s/%d: fill %d%%: %d of %d claims per node held (%d written in %.1f s)", l.name, n, fill, next, cell.fill.capacity(), n*(next-held), time.Since(t).Seconds())
		}
		held = next
		// The scheduler's informers need a moment for the last slices
		// and claims, and the API server and the scheduler digest the
		// fill for a while after it was written (thousands of claims at
		// 500 nodes): the timed pods must not pay for that.
		waited, busy := c.settle(ctx, 3*time.Second, 2*time.Minute)
		logf("%s/%d: fill %d%%: control plane idle after %.0f s (%.2f cores in the last second)", l.name, n, fill, waited.Seconds(), busy)
		rs, err := runFill(ctx, o, c, cs, cell, fill, cappedPods(timedPods(n, cell.ppn, cell.fill.capacity()-held), o.maxPods))
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// runFill runs every mode o.repeats times at one fill level.
func runFill(ctx context.Context, o options, c *cluster, cs kubernetes.Interface, cell cellSpec, fill, pods int) ([]runResult, error) {
	l, n, modes := cell.l, cell.n, cell.modes
	var out []runResult
	for _, mode := range modes {
		if mode == "templates" && c.procs["kube-controller-manager"] == nil {
			if err := c.startKCM(ctx); err != nil {
				return out, err
			}
		}
		for r := range o.repeats {
			spec := runSpec{l: l, nodes: n, pods: pods, fill: fill, pctScore: o.pctScore, mode: mode, repeat: r, workers: o.workers, stall: o.stall, profileSecs: o.profileSecs}
			if r == 0 && o.profileCell == fmt.Sprintf("%s/%d/%s", l.name, n, mode) {
				spec.profileTo = filepath.Join(filepath.Dir(o.out), fmt.Sprintf("scheduler-%s-%d-%s.pprof", l.name, n, mode))
			}
			res, err := runOnce(ctx, c, cs, spec)
			if err != nil {
				return out, err
			}
			out = append(out, res)
			if err := checkFillHeld(ctx, cs); err != nil {
				return out, err
			}
			logf("%s/%d/fill %d%%/%s #%d: %d/%d pods bound in %.1f s (%.1f pods/s; created in %.1f s), p50 %.2f s p99 %.2f s, Filter p50 %s, sched %.2f cores, apiserver %.2f cores, machine %.2f of %d",
				l.name, n, fill, mode, r, res.Bound, res.Pods, res.Seconds, res.PodsPerSec, res.CreateSec, res.P50, res.P99, ms(res.FilterP50), res.SchedCores, res.APICores, res.TotalCores, numCPU())
			if err := cleanup(ctx, cs, o.workers); err != nil {
				return out, fmt.Errorf("cleanup: %w", err)
			}
		}
	}
	return out, nil
}

func ms(sec float64) string {
	if math.IsNaN(sec) {
		return "-"
	}
	if math.IsInf(sec, 1) {
		return "> 22 ms" // the metric's last finite bucket
	}
	if sec < 0.001 {
		return fmt.Sprintf("%.0f µs", sec*1e6)
	}
	return fmt.Sprintf("%.1f ms", sec*1e3)
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 1<<20) }

func numCPU() int { return runtime.NumCPU() }

// machineCPU returns busy and total jiffies of the whole machine.
func machineCPU() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i, s := range f[1:min(len(f), 9)] { // user..steal; guest is in user
		v, _ := strconv.ParseFloat(s, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}
