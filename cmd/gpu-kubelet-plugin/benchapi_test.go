// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// BenchmarkPrepareAPI measures prepare and unprepare over the kubelet's
// gRPC API against a real kube-apiserver: the plugin runs as the binary
// does (newCommand, shipped flag defaults, simulated 8x H100), so its claim
// GETs and device-status writes go through real HTTP, real rate limiters
// and a real apiserver. It runs only with KUBECONFIG_BENCH set to a
// kubeconfig with admin rights; hack/bench-api.sh (make bench-api) sets
// one up. Use -benchtime=300x for n=300 cycles per concurrency.
//
// Like the kubelet, every cycle uses a new claim. Claims are created and
// allocated before the clock starts and deleted after it stops: only the
// two gRPC calls are timed. The plugin registers on its own Node
// (unschedulable, tainted) under its own driver name, so nothing else on a
// shared cluster can be scheduled onto its devices; both are removed at
// the end. Extra plugin flags: BENCH_PLUGIN_FLAGS (space-separated).
func BenchmarkPrepareAPI(b *testing.B) {
	kubeconfig := os.Getenv("KUBECONFIG_BENCH")
	if kubeconfig == "" {
		b.Skip("KUBECONFIG_BENCH is not set; see hack/bench-api.sh")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000 // the harness's own client; the plugin's are its own
	admin := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	node := "gdra-bench-" + rand.String(5)
	const driverName = "bench.gpu.nvidia.com"
	_, err = admin.CoreV1().Nodes().Create(ctx, &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       v1.NodeSpec{Unschedulable: true, Taints: []v1.Taint{{Key: "gpu-dra-driver/bench", Effect: v1.TaintEffectNoSchedule}}},
	}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
		_ = admin.ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{},
			metav1.ListOptions{FieldSelector: "spec.nodeName=" + node + ",spec.driver=" + driverName})
	})

	root, err := os.MkdirTemp("", "gdra") // socket paths must stay short
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(root) })
	var extra []string
	if f := os.Getenv("BENCH_PLUGIN_FLAGS"); f != "" {
		extra = strings.Fields(f)
	}
	pluginCtx, stop := context.WithCancel(klog.NewContext(ctx, klog.Background()))
	done := make(chan error, 1)
	cmd := newCommand()
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig, "--node-name", node, "--driver-name", driverName,
		"--simulate", "h100x8", "--kubelet-dir", filepath.Join(root, "kubelet"), "--state-dir", filepath.Join(root, "state"),
		"--cdi-root", filepath.Join(root, "cdi"), "--http-endpoint", "", "--v", "0"}, extra...))
	go func() { done <- cmd.ExecuteContext(pluginCtx) }()
	b.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("plugin: %v", err)
			}
		case <-time.After(time.Minute):
			b.Error("the plugin did not stop within a minute")
		}
	})
	sock := filepath.Join(root, "kubelet", "plugins", driverName, "dra.sock")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case err := <-done:
			b.Fatalf("plugin exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatal("plugin socket did not appear")
		}
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	kubelet := drapb.NewDRAPluginClient(conn)

	for _, concurrency := range []int{1, 8} {
		b.Run(fmt.Sprintf("concurrency=%d", concurrency), func(b *testing.B) {
			benchAPICycles(b, admin, kubelet, node, driverName, concurrency)
		})
	}
}

func benchAPICycles(b *testing.B, admin kubernetes.Interface, kubelet drapb.DRAPluginClient, node, driverName string, concurrency int) {
	ctx := context.Background()
	const warmup = 10
	run := rand.String(5)
	total := b.N + warmup
	claims := make([]*resourceapi.ResourceClaim, total)
	labels := map[string]string{"gpu-dra-driver/bench": run}
	b.Cleanup(func() {
		_ = admin.ResourceV1().ResourceClaims("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "gpu-dra-driver/bench=" + run})
	})
	// Slot w uses gpu-w: no device is prepared for two claims at once.
	var wg sync.WaitGroup
	errs := make(chan error, total)
	sem := make(chan struct{}, 16)
	for i := range claims {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			c, err := createAllocatedClaim(ctx, admin, fmt.Sprintf("bench-%s-%d", run, i), labels, node, driverName, fmt.Sprintf("gpu-%d", i%concurrency))
			claims[i] = c
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	type sample struct{ prepare, unprepare time.Duration }
	cycle := func(c *resourceapi.ResourceClaim) (sample, error) {
		req := []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}
		start := time.Now()
		p, err := kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: req})
		var s sample
		s.prepare = time.Since(start)
		if err != nil {
			return s, err
		}
		if r := p.Claims[string(c.UID)]; r == nil || r.Error != "" || len(r.Devices) != 1 {
			return s, fmt.Errorf("prepare %s: %v", c.Name, r)
		}
		start = time.Now()
		u, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: req})
		s.unprepare = time.Since(start)
		if err != nil {
			return s, err
		}
		if r := u.Claims[string(c.UID)]; r == nil || r.Error != "" {
			return s, fmt.Errorf("unprepare %s: %v", c.Name, r)
		}
		return s, nil
	}
	runSlots := func(claims []*resourceapi.ResourceClaim, samples []sample) error {
		var wg sync.WaitGroup
		errs := make(chan error, concurrency)
		for w := range concurrency {
			wg.Go(func() {
				for i := w; i < len(claims); i += concurrency {
					s, err := cycle(claims[i])
					if err != nil {
						errs <- err
						return
					}
					if samples != nil {
						samples[i] = s
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	// A fresh plugin starts with full rate-limiter buckets (burst 100 at
	// 50/s by default); let them refill after the previous run.
	time.Sleep(3 * time.Second)
	if err := runSlots(claims[:warmup], nil); err != nil {
		b.Fatal(err)
	}
	samples := make([]sample, b.N)
	b.ResetTimer()
	start := time.Now()
	if err := runSlots(claims[warmup:], samples); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()

	pct := func(get func(sample) time.Duration, q float64) float64 {
		d := make([]time.Duration, len(samples))
		for i, s := range samples {
			d[i] = get(s)
		}
		slices.Sort(d)
		return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000
	}
	prep := func(s sample) time.Duration { return s.prepare }
	unprep := func(s sample) time.Duration { return s.unprepare }
	b.ReportMetric(pct(prep, 0.50), "prepare-p50-ms")
	b.ReportMetric(pct(prep, 0.99), "prepare-p99-ms")
	b.ReportMetric(pct(unprep, 0.50), "unprepare-p50-ms")
	b.ReportMetric(pct(unprep, 0.99), "unprepare-p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
}

// createAllocatedClaim does what the scheduler does for the plugin: a claim
// for one device, allocated to it on node.
func createAllocatedClaim(ctx context.Context, admin kubernetes.Interface, name string, labels map[string]string, node, driverName, device string) (*resourceapi.ResourceClaim, error) {
	c, err := admin.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: driverName},
		}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	c.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: driverName, Pool: node, Device: device,
		}}},
		NodeSelector: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchFields: []v1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: v1.NodeSelectorOpIn, Values: []string{node},
		}}}}},
	}
	c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: "bench-pod-" + c.UID}}
	return admin.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, c, metav1.UpdateOptions{})
}
