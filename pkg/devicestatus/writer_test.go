// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package devicestatus

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"k8s.io/utils/ptr"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/testwait"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
)

// The plugin hands a Writer to prepare as its StatusReporter.
var _ prepare.StatusReporter = (*Writer)(nil)

// apiserver records the status writes a fake clientset receives; answer
// decides each one (nil: success).
type apiserver struct {
	mu     sync.Mutex
	writes []write
	answer func(w write) error
}

type write struct {
	claim      string
	uuids      []string
	shareIDs   []string
	conditions []string // type=status/reason per device
}

func newAPIServer(t *testing.T, answer func(write) error) (*fake.Clientset, *apiserver) {
	t.Helper()
	s := &apiserver{answer: answer}
	c := fake.NewClientset()
	c.PrependReactor("patch", "resourceclaims", func(action k8stesting.Action) (bool, runtime.Object, error) {
		p := action.(k8stesting.PatchAction)
		if p.GetSubresource() != "status" {
			t.Errorf("patch of subresource %q", p.GetSubresource())
		}
		var claim resourceapi.ResourceClaim
		if err := json.Unmarshal(p.GetPatch(), &claim); err != nil {
			t.Errorf("apply body: %v", err)
		}
		w := write{claim: p.GetName()}
		for _, d := range claim.Status.Devices {
			var data configapi.DeviceStatusData
			if err := json.Unmarshal(d.Data.Raw, &data); err != nil {
				t.Errorf("device data: %v", err)
			}
			w.uuids = append(w.uuids, data.UUID)
			w.shareIDs = append(w.shareIDs, ptr.Deref(d.ShareID, ""))
			for _, c := range d.Conditions {
				w.conditions = append(w.conditions, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
			}
		}
		s.mu.Lock()
		s.writes = append(s.writes, w)
		s.mu.Unlock()
		if s.answer != nil {
			if err := s.answer(w); err != nil {
				return true, nil, err
			}
		}
		return true, &claim, nil
	})
	return c, s
}

func (s *apiserver) get() []write {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]write(nil), s.writes...)
}

func (s *apiserver) waitFor(t *testing.T, n int) []write {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.get()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("waited for %d status writes, got %v", n, s.get())
		}
		time.Sleep(time.Millisecond)
	}
	return s.get()
}

func start(t *testing.T, client *fake.Clientset, opts Options) *Writer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := New(ctx, client, "gpu.nvidia.com", opts)
	t.Cleanup(func() {
		cancel()
		testwait.Receive(t, w.Done, "the writer to stop")
	})
	return w
}

func claim(name string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)}}
}

func devices(uuid string) []checkpoint.PreparedDevice {
	return []checkpoint.PreparedDevice{{Pool: "n1", Device: "gpu-0", UUID: uuid, ProductName: "NVIDIA H100 80GB HBM3"}}
}

// records is a checkpoint stand-in: the claims it holds are prepared.
type records struct {
	mu       sync.Mutex
	prepared map[types.UID]bool
}

func (r *records) Get(uid types.UID) (checkpoint.PreparedClaim, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.prepared[uid] {
		return checkpoint.PreparedClaim{}, false
	}
	return checkpoint.PreparedClaim{UID: uid, State: checkpoint.PrepareCompleted}, true
}

// TestCoalescesToNewest queues updates of one claim while its first write
// is in flight: only the newest of them is written after it.
func TestCoalescesToNewest(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	first := true
	client, api := newAPIServer(t, func(w write) error {
		if w.claim == "a" && first {
			first = false
			entered <- struct{}{}
			<-release
		}
		return nil
	})
	w := start(t, client, Options{})

	w.Prepared(claim("a"), devices("GPU-1"))
	testwait.Receive(t, entered, "the first write of a") // in flight now
	for _, uuid := range []string{"GPU-2", "GPU-3", "GPU-4"} {
		w.Prepared(claim("a"), devices(uuid))
	}
	if got := w.Pending(); got != 1 {
		t.Fatalf("3 queued updates of one claim: %d pending, want 1", got)
	}
	close(release)
	api.waitFor(t, 2)
	time.Sleep(100 * time.Millisecond) // a third write would show up by now
	writes := api.get()
	want := []write{{"a", []string{"GPU-1"}, []string{""}, nil}, {"a", []string{"GPU-4"}, []string{""}, nil}}
	if fmt.Sprint(writes) != fmt.Sprint(want) {
		t.Fatalf("writes %v, want %v", writes, want)
	}
}

// TestNewestWinsBeforeFirstWrite queues 50 updates of one claim while
// the only worker is busy: one write follows, with the newest.
func TestNewestWinsBeforeFirstWrite(t *testing.T) {
	block := make(chan struct{})
	client, api := newAPIServer(t, func(w write) error {
		if w.claim == "blocker" {
			<-block
		}
		return nil
	})
	w := start(t, client, Options{Workers: 1})
	w.Prepared(claim("blocker"), devices("GPU-0"))
	for i := 1; i <= 50; i++ {
		w.Prepared(claim("b"), devices(fmt.Sprintf("GPU-%d", i)))
	}
	close(block)
	api.waitFor(t, 2)
	time.Sleep(100 * time.Millisecond)
	want := []write{{"blocker", []string{"GPU-0"}, []string{""}, nil}, {"b", []string{"GPU-50"}, []string{""}, nil}}
	if got := api.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
}

// TestPreparedNeverBlocks: with the API hanging, Prepared returns at once,
// and the queue holds one entry per claim however often it is updated.
func TestPreparedNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	client, _ := newAPIServer(t, func(write) error { <-hang; return nil })
	w := start(t, client, Options{})
	begin := time.Now()
	for i := range 2000 {
		w.Prepared(claim(fmt.Sprintf("c%d", i%100)), devices(fmt.Sprintf("GPU-%d", i)))
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Fatalf("2000 updates took %v with the API hanging", d)
	}
	// Up to DefaultWorkers claims are in flight, the rest wait once each.
	if got := w.Pending(); got > 100 || got < 100-DefaultWorkers {
		t.Fatalf("%d pending for 100 claims", got)
	}
}

// TestSkipsUnpreparedClaims: a claim unprepared before its turn is not
// written.
func TestSkipsUnpreparedClaims(t *testing.T) {
	client, api := newAPIServer(t, nil)
	recs := &records{prepared: map[types.UID]bool{"uid-kept": true}}
	w := start(t, client, Options{Records: recs, Workers: 1})
	w.Prepared(claim("gone"), devices("GPU-0"))
	w.Prepared(claim("kept"), devices("GPU-1"))
	api.waitFor(t, 1)
	time.Sleep(50 * time.Millisecond)
	want := []write{{"kept", []string{"GPU-1"}, []string{""}, nil}}
	if got := api.get(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("writes %v, want %v", got, want)
	}
}

// TestRetries: transient errors are retried with back-off up to Retries;
// answers a retry cannot change are not.
func TestRetries(t *testing.T) {
	gr := schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}
	for _, tc := range []struct {
		name  string
		fails int
		err   error
		want  int
	}{
		{"transient-then-ok", 2, apierrors.NewInternalError(fmt.Errorf("etcd")), 3},
		{"transient-forever", 100, apierrors.NewServiceUnavailable("busy"), 4},
		{"not-found", 100, apierrors.NewNotFound(gr, "c"), 1},
		{"invalid", 100, apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: "ResourceClaim"}, "c", nil), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			client, api := newAPIServer(t, func(write) error {
				n++ // one claim: never concurrent
				if n <= tc.fails {
					return tc.err
				}
				return nil
			})
			start(t, client, Options{Retries: 4, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}).Prepared(claim("c"), devices("GPU-0"))
			api.waitFor(t, tc.want)
			time.Sleep(100 * time.Millisecond)
			if got := len(api.get()); got != tc.want {
				t.Fatalf("%d attempts, want %d", got, tc.want)
			}
		})
	}
}

// TestCopiesDevices: the caller may change its slice after Prepared.
func TestCopiesDevices(t *testing.T) {
	hang := make(chan struct{})
	client, api := newAPIServer(t, func(w write) error {
		if w.claim == "blocker" {
			<-hang
		}
		return nil
	})
	w := start(t, client, Options{Workers: 1})
	w.Prepared(claim("blocker"), devices("GPU-0"))
	devs := devices("GPU-1")
	w.Prepared(claim("c"), devs)
	devs[0].UUID = "GPU-changed"
	close(hang)
	writes := api.waitFor(t, 2)
	if got := writes[1].uuids[0]; got != "GPU-1" {
		t.Fatalf("wrote %s, want GPU-1", got)
	}
}

// TestShareIDIsWritten: the status of a share of a shareable GPU must
// name its share; the apiserver rejects an entry that matches no
// allocation result, so memory-fraction claims got no status before.
func TestShareIDIsWritten(t *testing.T) {
	client, api := newAPIServer(t, nil)
	w := start(t, client, Options{})
	devs := devices("GPU-0")
	devs[0].ShareID = "share-1"
	w.Prepared(claim("fraction"), devs)
	if got := api.waitFor(t, 1)[0].shareIDs; len(got) != 1 || got[0] != "share-1" {
		t.Fatalf("share IDs written: %q", got)
	}
}

func TestHealthConditionIsWritten(t *testing.T) {
	client, api := newAPIServer(t, nil)
	sick := map[string]bool{}
	var mu sync.Mutex
	w := start(t, client, Options{Health: func(pool, device string) (metav1.Condition, bool) {
		mu.Lock()
		defer mu.Unlock()
		if pool != "n1" {
			return metav1.Condition{}, false
		}
		if sick[device] {
			return metav1.Condition{Type: "Healthy", Status: metav1.ConditionFalse, Reason: "Xid79", Message: "XID 79", LastTransitionTime: metav1.Now()}, true
		}
		return metav1.Condition{Type: "Healthy", Status: metav1.ConditionTrue, Reason: "NoFaults", LastTransitionTime: metav1.Now()}, true
	}})
	w.Prepared(claim("c"), devices("GPU-0"))
	if got := api.waitFor(t, 1)[0].conditions; len(got) != 1 || got[0] != "Healthy=True/NoFaults" {
		t.Fatalf("conditions written: %q", got)
	}
	mu.Lock()
	sick["gpu-0"] = true
	mu.Unlock()
	w.Prepared(claim("c"), devices("GPU-0"))
	if got := api.waitFor(t, 2)[1].conditions; len(got) != 1 || got[0] != "Healthy=False/Xid79" {
		t.Fatalf("conditions written after the fault: %q", got)
	}
}
