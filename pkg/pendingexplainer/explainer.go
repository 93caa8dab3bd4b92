// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package pendingexplainer posts an Event on a pod the scheduler cannot
// place only because the GPUs it would fit carry device taints (an
// unhealthy GPU's gpu.nvidia.com/unhealthy, for example). Kubernetes 1.37's
// scheduler says just "cannot allocate all claims" there; the Event names
// the claim, the request, the tainted devices and their taints.
//
// The verdict is pkg/clusterview's (TaintBlocked), the scheduler's side of
// `gpudra diagnose pod` (the scheduler's CEL library and structured
// allocator), run over a snapshot built from informer caches: pods not yet
// on a node, claims, DeviceClasses and nodes whole, less what trim drops.
// ResourceSlices are the exception, as their devices would be most of the
// memory (~1 MiB per node of eight H100s with dynamic MIG): the cache keeps
// whole only the slices with a NoSchedule or NoExecute taint of this
// driver, and stubs of the others (stub.go). A diagnosis reads the rest of the few nodes it
// looks at (scope.go) from the API server (live.go).
package pendingexplainer

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ReportingController is the events.k8s.io reportingController of the
// Events, unless Config says otherwise.
const ReportingController = "gpu.nvidia.com/pending-explainer"

// Config configures an Explainer.
type Config struct {
	// DriverName is this driver's name: only taints of its devices are
	// explained.
	DriverName string
	Client     kubernetes.Interface
	// Recorder posts the Events (events.k8s.io); the caller owns its
	// broadcaster.
	Recorder events.EventRecorder
	// MinRepeat is the least time between two identical Events on one pod
	// (default 60 s).
	MinRepeat time.Duration
	// Resync is how often every unschedulable pod is looked at again
	// (default 5 min): a device freed by a claim of another namespace, or
	// a node label, can turn a pod's cause into a taint without any event
	// about the pod.
	Resync time.Duration
	// Clock defaults to the real one.
	Clock clock.PassiveClock
}

// Explainer watches unscheduled pods and posts the Events. Run it once.
type Explainer struct {
	cfg     Config
	logger  klog.Logger
	queue   workqueue.TypedRateLimitingInterface[string]
	podInf  informers.SharedInformerFactory
	inf     informers.SharedInformerFactory
	pods    corelisters.PodLister
	claims  resourcelisters.ResourceClaimLister
	slices  resourcelisters.ResourceSliceLister
	classes resourcelisters.DeviceClassLister
	nodes   corelisters.NodeLister
	synced  []cache.InformerSynced

	mu     sync.Mutex
	posted map[string]posted // pod key -> the last Event posted on it

	liveMu sync.Mutex
	live   map[string]listed // node or pool in scope -> its slices as listed (live.go)
}

type posted struct {
	message string
	at      time.Time
}

// allPods is the queue key that stands for every unschedulable pod: a
// change of devices can change any pod's cause, and one key for them all
// keeps a burst of slice updates to one pass.
const allPods = "*"

// allPodsDelay gathers a burst of slice and claim changes into one pass.
const allPodsDelay = 2 * time.Second

// New sets up the informers; nothing is read before Run.
func New(ctx context.Context, cfg Config) (*Explainer, error) {
	if cfg.MinRepeat == 0 {
		cfg.MinRepeat = time.Minute
	}
	if cfg.Resync == 0 {
		cfg.Resync = 5 * time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	e := &Explainer{
		cfg:    cfg,
		logger: klog.FromContext(ctx).WithName("pending-explainer"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pending-explainer"}),
		posted: map[string]posted{},
	}
	// Only pods no node has yet: a cluster's running pods would be most of
	// the memory and never matter here.
	e.podInf = informers.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.Resync, informers.WithTransform(trim),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" }))
	e.inf = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTransform(transform(cfg.DriverName)))
	pods := e.podInf.Core().V1().Pods()
	claims := e.inf.Resource().V1().ResourceClaims()
	slices := e.inf.Resource().V1().ResourceSlices()
	classes := e.inf.Resource().V1().DeviceClasses()
	nodes := e.inf.Core().V1().Nodes()
	e.pods, e.claims, e.slices, e.classes, e.nodes = pods.Lister(), claims.Lister(), slices.Lister(), classes.Lister(), nodes.Lister()

	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{pods.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    e.podChanged,
			UpdateFunc: func(_, obj any) { e.podChanged(obj) },
			DeleteFunc: e.podGone,
		}},
		// A slice change may add or clear a taint. Stubs count: a new
		// taint arrives as an update of one, and a changed untainted
		// slice of a node in scope changes what it can allocate.
		{slices.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { e.queue.AddAfter(allPods, allPodsDelay) },
			UpdateFunc: func(any, any) { e.queue.AddAfter(allPods, allPodsDelay) },
			DeleteFunc: func(any) { e.queue.AddAfter(allPods, allPodsDelay) },
		}},
		// A released claim frees its devices: a pod that waited for one
		// may now wait only for a tainted one.
		{claims.Informer(), cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(old, obj any) {
				if allocated(old) && !allocated(obj) {
					e.queue.AddAfter(allPods, allPodsDelay)
				}
			},
			DeleteFunc: func(any) { e.queue.AddAfter(allPods, allPodsDelay) },
		}},
		{classes.Informer(), nil},
		{nodes.Informer(), nil},
	}
	for _, h := range handlers {
		e.synced = append(e.synced, h.inf.HasSynced)
		if h.h == nil {
			continue
		}
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("pending explainer: %w", err)
		}
	}
	return e, nil
}

// Run reads the caches and explains pods until ctx ends, then stops its
// informers.
func (e *Explainer) Run(ctx context.Context) error {
	e.podInf.Start(ctx.Done())
	e.inf.Start(ctx.Done())
	defer e.inf.Shutdown()
	defer e.podInf.Shutdown()
	defer e.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), e.synced...) {
		return ctx.Err()
	}
	e.logger.Info("Explaining pods that device taints keep Pending", "driver", e.cfg.DriverName)
	go func() {
		<-ctx.Done()
		e.queue.ShutDown()
	}()
	for e.next(ctx) {
	}
	return nil
}

func (e *Explainer) next(ctx context.Context) bool {
	key, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(key)
	if key == allPods {
		e.queueAll()
		return true
	}
	if err := e.sync(ctx, key); err != nil {
		e.logger.Error(err, "Explaining pod", "pod", key)
		e.queue.AddRateLimited(key)
		return true
	}
	e.queue.Forget(key)
	return true
}

func (e *Explainer) queueAll() {
	pods, err := e.pods.List(everything)
	if err != nil {
		e.logger.Error(err, "Listing unscheduled pods")
		return
	}
	for _, p := range pods {
		if unschedulable(p) {
			e.queue.Add(key(p))
		}
	}
}

func (e *Explainer) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if unschedulable(pod) {
		e.queue.Add(key(pod))
		return
	}
	e.forget(key(pod))
}

func (e *Explainer) podGone(obj any) {
	if k, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		e.forget(k)
	}
}

// forget drops what was posted on a pod that is gone or scheduled: a
// pod of the same name later gets its own Event.
func (e *Explainer) forget(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.posted, key)
}

// unschedulable: the scheduler tried the pod and found no node, and it
// asks for devices (claims, or extended resources a DeviceClass may
// back). The scheduler sets PodScheduled=False/Unschedulable each time.
func unschedulable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil || !wantsDevices(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

func wantsDevices(pod *corev1.Pod) bool {
	if len(pod.Spec.ResourceClaims) > 0 {
		return true
	}
	for _, ctrs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range ctrs {
			for name := range c.Resources.Limits {
				// Extended resources are domain-qualified; hugepages-*
				// and the kubernetes.io ones never come from a class.
				if strings.Contains(string(name), "/") && !strings.Contains(string(name), "kubernetes.io/") {
					return true
				}
			}
		}
	}
	return false
}

func allocated(obj any) bool {
	c, ok := obj.(*resourceapi.ResourceClaim)
	return ok && c.Status.Allocation != nil
}

func key(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }

// trim drops what the explainer never reads before an object enters a
// cache: managed fields everywhere, a node's status (its image list alone
// can be tens of kB) and annotations. Only labels and the name of a node
// matter to the allocator.
func trim(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	if n, ok := obj.(*corev1.Node); ok {
		n.Status = corev1.NodeStatus{}
		n.Annotations = nil
	}
	return obj, nil
}
