// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package devicestatus writes what was prepared into ResourceClaim
// status.devices from the background. It is the only part of the prepare
// path that talks to the API server, and it does so through its own client:
// prepare reaches it only through prepare.StatusReporter.
//
// The kubelet does not need the device status to start a container, so the
// writes never hold up prepare: Prepared only records the newest status of
// a claim and wakes a worker. Several updates of one claim that are queued
// at once collapse into the newest; a claim that was unprepared before its
// turn is skipped; writes that fail are retried with per-claim back-off.
package devicestatus

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
)

// Records tells whether a claim is still prepared; *checkpoint.Store is one.
type Records interface {
	Get(uid types.UID) (checkpoint.PreparedClaim, bool)
}

const (
	// DefaultWorkers write concurrently, each claim by one worker at a time.
	DefaultWorkers = 4
	// DefaultRetries bounds the attempts per update.
	DefaultRetries = 5
	// MaxPending bounds the claims waiting for a write; beyond it updates
	// are dropped (and logged). Coalescing keeps one entry per claim, so
	// it is only reached with that many claims prepared and unwritten.
	MaxPending = 16384
)

// Writer implements prepare.StatusReporter with server-side apply.
type Writer struct {
	client     kubernetes.Interface
	driverName string
	records    Records
	health     func(pool, device string) (metav1.Condition, bool)
	retries    int
	queue      workqueue.TypedRateLimitingInterface[types.UID]

	mu      sync.Mutex
	pending map[types.UID]update // newest update per claim, not yet taken by a worker

	// Done is closed when the workers have stopped (for tests).
	Done chan struct{}
}

type update struct {
	namespace, name string
	uid             types.UID
	devices         []checkpoint.PreparedDevice
}

// Options tune a Writer; the zero value gives the defaults.
type Options struct {
	// Records, when set, is asked before each write whether the claim is
	// still prepared; claims unprepared in the meantime are not written.
	Records Records
	// Health, when set, gives a device's health condition, written into
	// its status.devices[].conditions (pkg/health via the driver).
	Health  func(pool, device string) (metav1.Condition, bool)
	Workers int
	Retries int
	// BaseDelay and MaxDelay bound the per-claim back-off after a failed write.
	BaseDelay, MaxDelay time.Duration
}

// New starts a writer whose workers stop when ctx ends. client should be
// the writer's own, with its own rate limiter: sharing one with the
// kubelet plugin helper, which GETs the claim inside every prepare, makes
// prepares queue behind status writes.
func New(ctx context.Context, client kubernetes.Interface, driverName string, opts Options) *Writer {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Retries <= 0 {
		opts.Retries = DefaultRetries
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = 50 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = 5 * time.Second
	}
	w := &Writer{
		client: client, driverName: driverName, records: opts.Records, health: opts.Health, retries: opts.Retries,
		queue:   workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](opts.BaseDelay, opts.MaxDelay)),
		pending: map[types.UID]update{},
		Done:    make(chan struct{}),
	}
	var wg sync.WaitGroup
	for range opts.Workers {
		wg.Go(func() {
			for w.processNext(ctx) {
			}
		})
	}
	go func() {
		<-ctx.Done()
		w.queue.ShutDown()
		wg.Wait()
		close(w.Done)
	}()
	return w
}

// Prepared implements prepare.StatusReporter. It never blocks on the API.
func (w *Writer) Prepared(claim *resourceapi.ResourceClaim, devices []checkpoint.PreparedDevice) {
	u := update{namespace: claim.Namespace, name: claim.Name, uid: claim.UID, devices: cloneDevices(devices)}
	w.mu.Lock()
	if _, queued := w.pending[u.uid]; !queued && len(w.pending) >= MaxPending {
		w.mu.Unlock()
		klog.Background().Info("Device status queue full, dropping update", "claim", klog.KRef(u.namespace, u.name))
		return
	}
	w.pending[u.uid] = u // replaces an older update of the same claim
	w.mu.Unlock()
	// A claim already queued is not queued twice; one being written is
	// queued again once that write is done, and then writes the newest.
	w.queue.Add(u.uid)
}

// Pending is the number of claims waiting for a write.
func (w *Writer) Pending() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

func (w *Writer) processNext(ctx context.Context) bool {
	uid, shutdown := w.queue.Get()
	if shutdown {
		return false
	}
	defer w.queue.Done(uid)
	w.mu.Lock()
	u, ok := w.pending[uid]
	delete(w.pending, uid)
	w.mu.Unlock()
	if !ok {
		// Written already (a retry of an older update that a newer one overtook).
		w.queue.Forget(uid)
		return true
	}
	if !w.stillPrepared(uid) {
		w.queue.Forget(uid)
		return true
	}
	err := w.apply(ctx, u)
	if err == nil || !retriable(err) || ctx.Err() != nil {
		if err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(3).Info("Writing device status failed; not retrying", "claim", klog.KRef(u.namespace, u.name), "err", err)
		}
		w.queue.Forget(uid)
		return true
	}
	attempt := w.queue.NumRequeues(uid) + 1
	if attempt >= w.retries {
		klog.FromContext(ctx).Error(err, "Writing device status failed; giving up", "claim", klog.KRef(u.namespace, u.name), "attempts", attempt)
		w.queue.Forget(uid)
		return true
	}
	klog.FromContext(ctx).V(3).Info("Writing device status failed; retrying", "claim", klog.KRef(u.namespace, u.name), "attempt", attempt, "err", err)
	w.mu.Lock()
	if _, newer := w.pending[uid]; !newer {
		w.pending[uid] = u
	}
	w.mu.Unlock()
	w.queue.AddRateLimited(uid)
	return true
}

// stillPrepared skips claims unprepared since their update was queued: the
// write would fail (claim gone or deallocated) or, worse, put status on a
// claim this node no longer serves.
func (w *Writer) stillPrepared(uid types.UID) bool {
	if w.records == nil {
		return true
	}
	rec, ok := w.records.Get(uid)
	return ok && rec.State == checkpoint.PrepareCompleted
}

func (w *Writer) apply(ctx context.Context, u update) error {
	status := resourceac.ResourceClaimStatus()
	for _, d := range u.devices {
		data, _ := json.Marshal(configapi.DeviceStatusData{UUID: d.UUID, ProductName: d.ProductName})
		dev := resourceac.AllocatedDeviceStatus().
			WithDriver(w.driverName).WithPool(d.Pool).WithDevice(d.Device).
			WithData(runtime.RawExtension{Raw: data})
		if d.ShareID != "" {
			dev.WithShareID(d.ShareID) // the key of a share's status entry
		}
		if w.health != nil {
			if c, ok := w.health(d.Pool, d.Device); ok {
				dev.WithConditions(metav1ac.Condition().WithType(c.Type).WithStatus(c.Status).
					WithReason(c.Reason).WithMessage(c.Message).WithLastTransitionTime(c.LastTransitionTime))
			}
		}
		status.WithDevices(dev)
	}
	ac := resourceac.ResourceClaim(u.name, u.namespace).WithUID(u.uid).WithStatus(status)
	_, err := w.client.ResourceV1().ResourceClaims(u.namespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: w.driverName, Force: true})
	return err
}

// retriable is false for answers a retry cannot change: the claim is gone
// or replaced (UID precondition), or its allocation no longer lists the
// devices.
func retriable(err error) bool {
	return !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err)
}

// cloneDevices copies what the write reads, so that the caller may reuse
// its slice.
func cloneDevices(in []checkpoint.PreparedDevice) []checkpoint.PreparedDevice {
	out := make([]checkpoint.PreparedDevice, len(in))
	for i, d := range in {
		out[i] = checkpoint.PreparedDevice{Pool: d.Pool, Device: d.Device, UUID: d.UUID, ProductName: d.ProductName, ShareID: d.ShareID}
	}
	return out
}
