// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package devicestatus writes what was prepared into ResourceClaim
// status.devices from the background. It is the only part of the prepare
// path that talks to the API server, and it does so through its own client:
// prepare reaches it only through prepare.StatusReporter.
//
// The kubelet does not need the device status to start a container, so the
// writes never hold up prepare: Prepared only records the newest status of
// a claim and wakes a worker. With a Gate, a write waits until no kubelet
// call has been in flight for Quiet (at most MaxDefer after its prepare),
// so it is sent after the reply and never beside the kubelet's next calls
// (gate.go). Several updates of one claim that are queued at once collapse
// into the newest, so a claim's writes keep their order; a claim that was
// unprepared before its turn is skipped; writes that fail are retried with
// per-claim back-off for as long as the claim stays prepared. What a
// restart loses of the queue, start writes again for every kept claim
// (pkg/prepare RemoveStale).
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
	// DefaultQuiet is how long no kubelet call must have been in flight
	// before a write starts (with a Gate): longer than the gaps between a
	// kubelet's calls in a burst, far shorter than a container's start.
	DefaultQuiet = 50 * time.Millisecond
	// DefaultMaxDefer bounds how long a write waits for a quiet moment,
	// so that status appears under a steady stream of calls too.
	DefaultMaxDefer = 2 * time.Second
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
	retries    int // 0: until written or no longer prepared
	gate       *Gate
	quiet      time.Duration
	maxDefer   time.Duration
	queue      workqueue.TypedRateLimitingInterface[types.UID]

	mu      sync.Mutex
	pending map[types.UID]update // newest update per claim, not yet written
	seq     uint64
	stats   Stats

	// Done is closed when the workers have stopped (for tests).
	Done chan struct{}
}

type update struct {
	namespace, name string
	uid             types.UID
	devices         []checkpoint.PreparedDevice
	// queued is when the oldest update this one replaced was queued: a
	// claim updated again and again is not deferred past MaxDefer.
	queued time.Time
	seq    uint64 // tells this update from a newer one of the same claim
}

// Stats counts what became of the updates (logged when the writer stops).
type Stats struct {
	// Written is the number of successful writes; Skipped the updates of
	// claims unprepared before their turn; Failed those given up on (an
	// answer a retry cannot change, or Retries spent); Deferred the writes
	// that waited for the kubelet's calls to end.
	Written, Skipped, Failed, Deferred int
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
	// Retries bounds the attempts per update; 0 retries for as long as
	// the claim stays prepared.
	Retries int
	// BaseDelay and MaxDelay bound the per-claim back-off after a failed write.
	BaseDelay, MaxDelay time.Duration
	// Gate, when set, holds writes back while the kubelet's calls are in
	// flight: until none was for Quiet, at most MaxDefer after the update
	// (DefaultQuiet, DefaultMaxDefer when zero).
	Gate            *Gate
	Quiet, MaxDefer time.Duration
}

// New starts a writer whose workers stop when ctx ends. client should be
// the writer's own, with its own rate limiter: sharing one with the
// kubelet plugin helper, which GETs the claim inside every prepare, makes
// prepares queue behind status writes.
func New(ctx context.Context, client kubernetes.Interface, driverName string, opts Options) *Writer {
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = 50 * time.Millisecond
	}
	if opts.MaxDelay <= 0 {
		// Retries go on while the claim is prepared: an API server away
		// for long is asked every 30 s per claim, under the client's QPS.
		opts.MaxDelay = 30 * time.Second
	}
	if opts.Quiet <= 0 {
		opts.Quiet = DefaultQuiet
	}
	if opts.MaxDefer <= 0 {
		opts.MaxDefer = DefaultMaxDefer
	}
	w := &Writer{
		client: client, driverName: driverName, records: opts.Records, health: opts.Health, retries: max(opts.Retries, 0),
		gate: opts.Gate, quiet: opts.Quiet, maxDefer: opts.MaxDefer,
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
		st := w.Stats()
		klog.FromContext(ctx).Info("Device status writer stopped", "written", st.Written, "skipped", st.Skipped, "failed", st.Failed, "deferred", st.Deferred, "pending", w.Pending())
		close(w.Done)
	}()
	return w
}

// Gate is the writer's gate; nil without one.
func (w *Writer) Gate() *Gate { return w.gate }

// Stats returns the counts so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Prepared implements prepare.StatusReporter. It never blocks on the API.
func (w *Writer) Prepared(claim *resourceapi.ResourceClaim, devices []checkpoint.PreparedDevice) {
	u := update{namespace: claim.Namespace, name: claim.Name, uid: claim.UID, devices: cloneDevices(devices), queued: time.Now()}
	w.mu.Lock()
	old, queued := w.pending[u.uid]
	if !queued && len(w.pending) >= MaxPending {
		w.mu.Unlock()
		klog.Background().Info("Device status queue full, dropping update", "claim", klog.KRef(u.namespace, u.name))
		return
	}
	if queued {
		u.queued = old.queued
	}
	w.seq++
	u.seq = w.seq
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
	u, ok := w.peek(uid)
	if ok && w.stillPrepared(uid) && w.waitTurn(ctx, u) {
		u, ok = w.peek(uid) // the newest, should one have come meanwhile
	}
	if !ok {
		// Written already (a retry of an older update that a newer one overtook).
		w.queue.Forget(uid)
		return true
	}
	if ctx.Err() != nil {
		return true
	}
	// After the wait: a claim unprepared meanwhile is not written.
	if !w.stillPrepared(uid) {
		w.take(u, func(st *Stats) { st.Skipped++ })
		w.queue.Forget(uid)
		return true
	}
	w.take(u, nil)
	err := w.apply(ctx, u)
	if err == nil || !retriable(err) || ctx.Err() != nil {
		if err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).V(3).Info("Writing device status failed; not retrying", "claim", klog.KRef(u.namespace, u.name), "err", err)
		}
		w.count(func(st *Stats) {
			if err == nil {
				st.Written++
			} else if ctx.Err() == nil {
				st.Failed++
			}
		})
		w.queue.Forget(uid)
		return true
	}
	attempt := w.queue.NumRequeues(uid) + 1
	if w.retries > 0 && attempt >= w.retries {
		klog.FromContext(ctx).Error(err, "Writing device status failed; giving up", "claim", klog.KRef(u.namespace, u.name), "attempts", attempt)
		w.count(func(st *Stats) { st.Failed++ })
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

// peek returns the newest update of a claim, leaving it pending until it
// is taken (take): one that comes meanwhile replaces it there.
func (w *Writer) peek(uid types.UID) (update, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	u, ok := w.pending[uid]
	return u, ok
}

// take removes u from the pending updates unless a newer update of its
// claim replaced it (that one is queued again and written after), and
// counts what became of it.
func (w *Writer) take(u update, counted func(*Stats)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if cur, ok := w.pending[u.uid]; ok && cur.seq == u.seq {
		delete(w.pending, u.uid)
	}
	if counted != nil {
		counted(&w.stats)
	}
}

func (w *Writer) count(f func(*Stats)) {
	w.mu.Lock()
	f(&w.stats)
	w.mu.Unlock()
}

// waitTurn holds the write of u back while the kubelet's calls are in
// flight, until none has been for quiet or maxDefer has passed since u
// was queued, or its claim is unprepared. The worker sleeps rather than
// queueing u again: the items behind it wait in the queue, and only the
// workers look again, every quiet at most. It reports whether it waited.
func (w *Writer) waitTurn(ctx context.Context, u update) bool {
	if w.gate == nil {
		return false
	}
	waited := false
	for {
		left := w.maxDefer - time.Since(u.queued)
		wait := w.gate.untilQuiet(w.quiet)
		// A claim unprepared meanwhile frees the worker at once (it is
		// skipped), rather than holding it until the calls end.
		if wait <= 0 || left <= 0 || (waited && !w.stillPrepared(u.uid)) {
			break
		}
		if !waited {
			waited = true
			w.count(func(st *Stats) { st.Deferred++ })
		}
		t := time.NewTimer(min(wait, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return waited
		case <-t.C:
		}
	}
	return waited
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
