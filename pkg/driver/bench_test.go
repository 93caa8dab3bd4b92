// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"fmt"
	"io"
	"sort"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)

// cycle prepares and unprepares one claim over the socket.
func (n *node) cycle(ctx context.Context, c *resourceapi.ResourceClaim) error {
	req := pbClaims(c)
	p, err := n.kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: req})
	if err != nil {
		return err
	}
	if e := p.Claims[string(c.UID)].GetError(); e != "" {
		return fmt.Errorf("prepare: %s", e)
	}
	u, err := n.kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: req})
	if err != nil {
		return err
	}
	if e := u.Claims[string(c.UID)].GetError(); e != "" {
		return fmt.Errorf("unprepare: %s", e)
	}
	return nil
}

func quietLogs(b *testing.B) {
	var fs = klogFlags()
	_ = fs.Set("v", "0")
	b.Cleanup(func() { _ = fs.Set("v", "0") })
	klog.SetOutput(io.Discard)
}

// BenchmarkPrepareUnprepare measures one whole-GPU prepare+unprepare cycle
// through the kubelet's gRPC API over the unix socket, with simulated GPUs.
func BenchmarkPrepareUnprepare(b *testing.B) {
	quietLogs(b)
	n := newNode(b, "h100x8")
	n.fastStatusAPI()
	benchCycles(b, n, n.claim("bench", []string{"gpu-0"}))
}

// benchCycles runs b.N prepare+unprepare cycles of one claim and reports
// latency percentiles and the file system calls per cycle.
func benchCycles(b *testing.B, n *node, claim *resourceapi.ResourceClaim) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	before := capfile.Snapshot()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := n.cycle(ctx, claim); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
	reportFileCalls(b, capfile.Snapshot().Sub(before), b.N)
}

// reportFileCalls reports the file system calls of the prepare path
// (pkg/capfile counts them) per cycle, so that one more fsync, rename,
// unlink, mkdir or open shows beside the latency.
func reportFileCalls(b *testing.B, c capfile.Counts, cycles int) {
	per := func(v int64) float64 { return float64(v) / float64(cycles) }
	b.ReportMetric(per(c.Fsync), "fsync/op")
	b.ReportMetric(per(c.Rename), "rename/op")
	b.ReportMetric(per(c.Unlink), "unlink/op")
	b.ReportMetric(per(c.Mkdir), "mkdir/op")
	b.ReportMetric(per(c.Open), "open/op")
	b.ReportMetric(per(c.Chmod), "chmod/op")
}

// BenchmarkPrepareUnprepareParallel runs 8 claims on 8 GPUs concurrently.
func BenchmarkPrepareUnprepareParallel(b *testing.B) {
	quietLogs(b)
	n := newNode(b, "h100x8")
	n.fastStatusAPI()
	const workers = 8
	claims := make([]*resourceapi.ResourceClaim, workers)
	for i := range claims {
		claims[i] = n.claim(fmt.Sprintf("par-%d", i), []string{fmt.Sprintf("gpu-%d", i)})
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		iterations := b.N / workers
		if w < b.N%workers {
			iterations++
		}
		wg.Add(1)
		go func(c *resourceapi.ResourceClaim, iterations int) {
			defer wg.Done()
			for i := 0; i < iterations; i++ {
				if err := n.cycle(ctx, c); err != nil {
					errs <- err
					return
				}
			}
		}(claims[w], iterations)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cycles/s")
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}

// fastStatusAPI answers device-status writes at once. The fake clientset
// rebuilds a REST mapper for every server-side apply, which costs more CPU
// than the whole prepare; a real apiserver spends that time in its own
// process, and the plugin writes status off the prepare path anyway.
func (n *node) fastStatusAPI() {
	n.client.PrependReactor("patch", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "status" {
			return false, nil, nil
		}
		return true, &resourceapi.ResourceClaim{}, nil
	})
}

// BenchmarkMigPrepareUnprepare measures a dynamic MIG cycle: the GPU
// instance and compute instance are created at prepare and destroyed at
// unprepare (MIG mode switched on and off with them).
func BenchmarkMigPrepareUnprepare(b *testing.B) {
	quietLogs(b)
	n := newMigNode(b, "h100x8")
	n.fastStatusAPI()
	benchCycles(b, n, n.claim("bench-mig", []string{"gpu-0-mig-1g10gb-19-0"}))
}
