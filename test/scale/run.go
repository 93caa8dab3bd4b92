// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

type runResult struct {
	Layout       string  `json:"layout"`
	Nodes        int     `json:"nodes"`
	Mode         string  `json:"mode"`
	Fill         int     `json:"fillPercent"`
	PctScore     int     `json:"percentageOfNodesToScore,omitempty"`
	Repeat       int     `json:"repeat"`
	Pods         int     `json:"pods"`
	Bound        int     `json:"bound"`
	CreateSec    float64 `json:"createSec"` // first pod create issued to last create returned
	Seconds      float64 `json:"seconds"`   // first pod create issued to last pod bound
	PodsPerSec   float64 `json:"podsPerSec"`
	P50          float64 `json:"p50Sec"` // create issued to bind seen, per pod
	P99          float64 `json:"p99Sec"`
	FilterP50    float64 `json:"filterP50Sec"`
	FilterP99    float64 `json:"filterP99Sec"`
	FilterCalls  float64 `json:"filterCallsSampled"`
	FilterMean   float64 `json:"filterMeanSec"`
	PreBindP50   float64 `json:"preBindP50Sec"`
	PreBindMean  float64 `json:"preBindMeanSec"`
	APIRSS       float64 `json:"apiserverRSSMiB"`
	SchedRSS     float64 `json:"schedulerRSSMiB"`
	SchedCores   float64 `json:"schedulerCores"` // CPU seconds per wall second during the run
	SchedCPUPod  float64 `json:"schedulerCPUPerPodSec"`
	APICores     float64 `json:"apiserverCores"`
	EtcdCores    float64 `json:"etcdCores"`
	KCMCores     float64 `json:"kcmCores"`
	TotalCores   float64 `json:"machineCores"` // whole machine, from /proc/stat
	ProfileSaved string  `json:"profile,omitempty"`
}

type runSpec struct {
	l           layout
	nodes, pods int
	fill        int    // percent of each node held before the timed pods
	pctScore    int    // the scheduler's percentageOfNodesToScore (0: default)
	mode        string // "claims" or "templates"
	repeat      int
	workers     int
	stall       time.Duration
	profileTo   string // write a scheduler CPU profile of this run here (and the API server's beside it)
	profileSecs int
}

// runOnce creates the claims (or one template) and then the pods, and waits
// until every pod is bound or nothing was bound for spec.stall.
func runOnce(ctx context.Context, c *cluster, cs kubernetes.Interface, spec runSpec) (runResult, error) {
	res := runResult{Layout: spec.l.name, Nodes: spec.nodes, Mode: spec.mode, Fill: spec.fill, PctScore: spec.pctScore, Repeat: spec.repeat, Pods: spec.pods}
	claimSpec := resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: spec.l.request.DeepCopy()}}}}
	podClaim := func(i int) corev1.PodResourceClaim {
		if spec.mode == "templates" {
			return corev1.PodResourceClaim{Name: "gpu", ResourceClaimTemplateName: ptr.To("gpu")}
		}
		return corev1.PodResourceClaim{Name: "gpu", ResourceClaimName: ptr.To(fmt.Sprintf("c-%d", i))}
	}
	if spec.mode == "templates" {
		t := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: claimSpec}}
		if _, err := cs.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, t, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return res, err
		}
	} else {
		err := parallel(ctx, spec.pods, spec.workers, func(ctx context.Context, i int) error {
			rc := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%d", i)}, Spec: claimSpec}
			_, err := cs.ResourceV1().ResourceClaims(namespace).Create(ctx, rc, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return res, fmt.Errorf("create claims: %w", err)
		}
	}

	// Bind times, as a watch sees spec.nodeName appear.
	created := make([]time.Time, spec.pods)
	bound := make([]time.Time, spec.pods)
	var mu sync.Mutex
	var nBound atomic.Int64
	index := func(name string) int {
		var i int
		if _, err := fmt.Sscanf(name, "p-%d", &i); err != nil || i < 0 || i >= spec.pods {
			return -1
		}
		return i
	}
	see := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" {
			return
		}
		now := time.Now()
		if i := index(p.Name); i >= 0 {
			mu.Lock()
			if bound[i].IsZero() {
				bound[i] = now
				nBound.Add(1)
			}
			mu.Unlock()
		}
	}
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return res, err
	}
	stopInf := make(chan struct{})
	defer close(stopInf)
	f.Start(stopInf)
	f.WaitForCacheSync(stopInf)

	_, sched0 := c.procStats("kube-scheduler")
	_, api0 := c.procStats("kube-apiserver")
	_, etcd0 := c.procStats("etcd")
	_, kcm0 := c.procStats("kube-controller-manager")
	busy0, all0 := machineCPU()
	before, err := c.scrapePlugin("DynamicResources")
	if err != nil {
		return res, err
	}
	var profWG sync.WaitGroup
	if spec.profileTo != "" {
		profWG.Go(func() {
			if err := c.saveProfile(c.schedURL, spec.profileTo, spec.profileSecs); err != nil {
				fmt.Fprintf(os.Stderr, "profile: %v\n", err)
				return
			}
			res.ProfileSaved = spec.profileTo
		})
		// The API server's CPU is the other half of a run's cost on a
		// small machine: its profile goes beside the scheduler's.
		profWG.Go(func() {
			file := filepath.Join(filepath.Dir(spec.profileTo), "apiserver-"+strings.TrimPrefix(filepath.Base(spec.profileTo), "scheduler-"))
			if err := c.saveProfile(c.apiURL, file, spec.profileSecs); err != nil {
				fmt.Fprintf(os.Stderr, "apiserver profile: %v\n", err)
			}
		})
	}

	start := time.Now()
	err = parallel(ctx, spec.pods, spec.workers, func(ctx context.Context, i int) error {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", i)},
			Spec: corev1.PodSpec{
				AutomountServiceAccountToken:  ptr.To(false),
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				ResourceClaims:                []corev1.PodResourceClaim{podClaim(i)},
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10.2",
					Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
			},
		}
		t := time.Now()
		if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return err
		}
		created[i] = t
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("create pods: %w", err)
	}
	res.CreateSec = time.Since(start).Seconds()

	last, lastN := time.Now(), int64(-1)
	for nBound.Load() < int64(spec.pods) {
		if n := nBound.Load(); n != lastN {
			last, lastN = time.Now(), n
		} else if time.Since(last) > spec.stall {
			fmt.Fprintf(os.Stderr, "  %s/%d/%s: %d of %d pods bound, none for %s; giving up\n", spec.l.name, spec.nodes, spec.mode, n, spec.pods, spec.stall)
			break
		}
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	end := time.Now()
	after, err := c.scrapePlugin("DynamicResources")
	if err != nil {
		return res, err
	}
	_, sched1 := c.procStats("kube-scheduler")
	_, api1 := c.procStats("kube-apiserver")
	_, etcd1 := c.procStats("etcd")
	_, kcm1 := c.procStats("kube-controller-manager")
	busy1, all1 := machineCPU()
	res.APIRSS, _ = c.procStats("kube-apiserver")
	res.SchedRSS, _ = c.procStats("kube-scheduler")

	mu.Lock()
	var lat []float64
	lastBind := start
	for i := range bound {
		if bound[i].IsZero() || created[i].IsZero() {
			continue
		}
		lat = append(lat, bound[i].Sub(created[i]).Seconds())
		if bound[i].After(lastBind) {
			lastBind = bound[i]
		}
	}
	mu.Unlock()
	res.Bound = len(lat)
	if res.Bound < spec.pods {
		lastBind = end
	}
	res.Seconds = lastBind.Sub(start).Seconds()
	res.PodsPerSec = float64(res.Bound) / res.Seconds
	sort.Float64s(lat)
	res.P50, res.P99 = pct(lat, 0.50), pct(lat, 0.99)
	wall := end.Sub(start).Seconds()
	res.SchedCores = (sched1 - sched0) / wall
	if res.Bound > 0 {
		res.SchedCPUPod = (sched1 - sched0) / float64(res.Bound)
	}
	res.APICores = (api1 - api0) / wall
	res.EtcdCores = (etcd1 - etcd0) / wall
	res.KCMCores = (kcm1 - kcm0) / wall
	if all1 > all0 {
		res.TotalCores = float64(numCPU()) * (busy1 - busy0) / (all1 - all0)
	}
	filter := minus(after, before, "Filter")
	res.FilterP50, res.FilterP99, res.FilterCalls = filter.quantile(0.5), filter.quantile(0.99), filter.count
	res.FilterMean = filter.mean()
	preBind := minus(after, before, "PreBind")
	res.PreBindP50, res.PreBindMean = preBind.quantile(0.5), preBind.mean()
	profWG.Wait()
	return res, nil
}
