// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The fleet (Nodes and the plugin's ResourceSlices), the DeviceClasses, and
// one measured run: pods with claims created at once, timed until every pod
// is bound, then everything removed again for the next run.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

const (
	templateNode = "benchscale-template-node"
	namespace    = "bench"
)

// layout is one way the driver publishes a node and one kind of pod request.
type layout struct {
	name        string
	pluginFlags []string
	request     resourceapi.ExactDeviceRequest
}

func layouts() []layout {
	whole := resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	mig1g := resourceapi.ExactDeviceRequest{DeviceClassName: "mig.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}}}
	frac := resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.allowMultipleAllocations"}}},
		Capacity:  &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("20Gi")}}}
	return []layout{
		{name: "whole", pluginFlags: []string{"--feature-gates=DynamicMIG=false"}, request: whole},
		{name: "mig-1g", request: mig1g},
		{name: "mig-whole", request: whole},
		{name: "frac-20gi", pluginFlags: []string{"--fractional-memory"}, request: frac},
	}
}

// pluginSlices runs the plugin's --print-slices once for a template node.
func pluginSlices(plugin, profile string, l layout) ([]*resourceapi.ResourceSlice, error) {
	args := append([]string{"--print-slices", "--simulate=" + profile, "--node-name=" + templateNode}, l.pluginFlags...)
	var out, errb bytes.Buffer
	cmd := exec.Command(plugin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", plugin, strings.Join(args, " "), err, errb.String())
	}
	var slices []*resourceapi.ResourceSlice
	err := decodeAll(&out, func(raw []byte) error {
		s := &resourceapi.ResourceSlice{}
		if err := utilyaml.Unmarshal(raw, s); err != nil {
			return err
		}
		if s.Kind == "ResourceSlice" {
			slices = append(slices, s)
		}
		return nil
	})
	if len(slices) == 0 && err == nil {
		err = errors.New("the plugin printed no ResourceSlice")
	}
	return slices, err
}

func decodeAll(r io.Reader, fn func([]byte) error) error {
	rd := utilyaml.NewYAMLReader(bufioReader(r))
	for {
		raw, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if err := fn(raw); err != nil {
			return err
		}
	}
}

// deviceClasses reads the DeviceClass documents of a multi-document YAML
// file (the chart rendered by helm template).
func deviceClasses(file string) ([]*resourceapi.DeviceClass, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*resourceapi.DeviceClass
	err = decodeAll(f, func(raw []byte) error {
		var tm metav1.TypeMeta
		if err := utilyaml.Unmarshal(raw, &tm); err != nil {
			return err
		}
		if tm.Kind != "DeviceClass" {
			return nil
		}
		dc := &resourceapi.DeviceClass{}
		if err := utilyaml.Unmarshal(raw, dc); err != nil {
			return err
		}
		out = append(out, dc)
		return nil
	})
	if len(out) == 0 && err == nil {
		err = fmt.Errorf("%s holds no DeviceClass", file)
	}
	return out, err
}

// parallel calls fn(0..n-1) from workers goroutines; the first error wins.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// createFleet creates the DeviceClasses, n Nodes, and for each node the
// template slices with only the node and pool renamed.
func createFleet(ctx context.Context, cs kubernetes.Interface, classes []*resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice, n, workers int) error {
	for _, dc := range classes {
		dc = dc.DeepCopy()
		dc.ResourceVersion = ""
		if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("DeviceClass %s: %w", dc.Name, err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The ServiceAccount admission plugin wants the namespace's default
	// ServiceAccount; no controller-manager creates it here.
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("224"), corev1.ResourceMemory: resource.MustParse("2Ti"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	return parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		name := nodeName(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		node, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		// The apiserver's TaintNodesByCondition admission taints a new node
		// not-ready; no node lifecycle controller lifts it here.
		node.Spec.Taints = nil
		if node, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s taints: %w", name, err)
		}
		node.Status = corev1.NodeStatus{
			Capacity: alloc, Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", name, err)
		}
		for _, t := range slices {
			s := t.DeepCopy()
			s.ResourceVersion = ""
			s.Name = strings.ReplaceAll(s.Name, templateNode, name)
			s.GenerateName = strings.ReplaceAll(s.GenerateName, templateNode, name)
			if s.Spec.NodeName != nil {
				s.Spec.NodeName = ptr.To(name)
			}
			s.Spec.Pool.Name = strings.ReplaceAll(s.Spec.Pool.Name, templateNode, name)
			if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("slice of %s: %w", name, err)
			}
		}
		return nil
	})
}

type runResult struct {
	Layout       string  `json:"layout"`
	Nodes        int     `json:"nodes"`
	Mode         string  `json:"mode"`
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
	APICores     float64 `json:"apiserverCores"`
	EtcdCores    float64 `json:"etcdCores"`
	KCMCores     float64 `json:"kcmCores"`
	TotalCores   float64 `json:"machineCores"` // whole machine, from /proc/stat
	ProfileSaved string  `json:"profile,omitempty"`
}

type runSpec struct {
	l           layout
	nodes, pods int
	mode        string // "claims" or "templates"
	repeat      int
	workers     int
	stall       time.Duration
	profileTo   string // write a scheduler CPU profile of this run here
	profileSecs int
}

// runOnce creates the claims (or one template) and then the pods, and waits
// until every pod is bound or nothing was bound for spec.stall.
func runOnce(ctx context.Context, c *cluster, cs kubernetes.Interface, spec runSpec) (runResult, error) {
	res := runResult{Layout: spec.l.name, Nodes: spec.nodes, Mode: spec.mode, Repeat: spec.repeat, Pods: spec.pods}
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
			if err := c.saveProfile(spec.profileTo, spec.profileSecs); err != nil {
				fmt.Fprintf(os.Stderr, "profile: %v\n", err)
				return
			}
			res.ProfileSaved = spec.profileTo
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

func pct(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// cleanup force-deletes the pods and removes every claim (there is no
// kubelet to confirm termination and no garbage collector); the scheduler
// sees the devices free again when the claims are gone.
func cleanup(ctx context.Context, cs kubernetes.Interface, workers int) error {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	err = parallel(ctx, len(pods.Items), workers, func(ctx context.Context, i int) error {
		err := cs.CoreV1().Pods(namespace).Delete(ctx, pods.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	for attempt := 0; ; attempt++ {
		claims, err := cs.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(claims.Items) == 0 {
			break
		}
		if attempt > 10 {
			return fmt.Errorf("%d claims remain", len(claims.Items))
		}
		err = parallel(ctx, len(claims.Items), workers, func(ctx context.Context, i int) error {
			rc := &claims.Items[i]
			if len(rc.Finalizers) > 0 {
				_, err := cs.ResourceV1().ResourceClaims(namespace).Patch(ctx, rc.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			err := cs.ResourceV1().ResourceClaims(namespace).Delete(ctx, rc.Name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("delete claims: %w", err)
		}
	}
	// Let the scheduler's informers catch up with the deletions.
	time.Sleep(3 * time.Second)
	return nil
}
