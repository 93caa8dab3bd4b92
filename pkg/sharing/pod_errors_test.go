// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

var errAPI = errors.New("the API server is unavailable")

func failing(err error) k8stesting.ReactionFunc {
	return func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, err }
}

// Every API failure reaches the caller with the pod it was about.
func TestPodRunnerReportsAPIErrors(t *testing.T) {
	ctx := context.Background()
	d := (&MPS{Root: "/s/mps"}).Daemon(fakeUUID)
	for _, tc := range []struct {
		verb string
		call func(r *PodRunner) error
		want string
	}{
		{"create", func(r *PodRunner) error { return r.Start(ctx, d) }, "create daemon pod"},
		{"get", func(r *PodRunner) error { _, err := r.Running(ctx, d); return err }, "get daemon pod"},
		{"delete", func(r *PodRunner) error {
			if err := r.Start(ctx, d); err != nil {
				return err
			}
			return r.Stop(ctx, d)
		}, "delete daemon pod"},
		{"list", func(r *PodRunner) error { _, err := r.List(ctx); return err }, "list daemon pods"},
	} {
		r, c := newPodRunner("")
		c.PrependReactor(tc.verb, "pods", failing(errAPI))
		err := tc.call(r)
		if err == nil || !errors.Is(err, errAPI) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s failing: %v, want %q wrapping the API's error", tc.verb, err, tc.want)
		}
		if tc.verb != "list" && !strings.Contains(err.Error(), "gpu-dra-driver/"+r.PodName(d.DeviceUUID)) {
			t.Errorf("%s failing: %v does not name the pod", tc.verb, err)
		}
	}
	// Running fails through the MPS layer too, naming the device.
	r, c := newPodRunner("")
	c.PrependReactor("get", "pods", failing(errAPI))
	m := &MPS{Root: t.TempDir(), Runner: r, ReadyTimeout: time.Second}
	if err := m.Ensure(m.Daemon(fakeUUID)); err == nil || !errors.Is(err, errAPI) || !strings.Contains(err.Error(), fakeUUID) {
		t.Errorf("Ensure when the pod cannot be read: %v", err)
	}
}

// A pod that already exists and lives is the daemon: Start leaves it; one
// whose state cannot be read is an error, not a second create.
func TestPodRunnerStartWithAnExistingPod(t *testing.T) {
	ctx := context.Background()
	r, c := newPodRunner("")
	d := (&MPS{Root: "/s/mps"}).Daemon(fakeUUID)
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	before, _ := c.CoreV1().Pods(r.Namespace).Get(ctx, r.PodName(d.DeviceUUID), metav1.GetOptions{})
	before.Annotations["marker"] = "first"
	if _, err := c.CoreV1().Pods(r.Namespace).Update(ctx, before, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx, d); err != nil {
		t.Fatalf("Start with the daemon's pod running: %v", err)
	}
	after, _ := c.CoreV1().Pods(r.Namespace).Get(ctx, r.PodName(d.DeviceUUID), metav1.GetOptions{})
	if after.Annotations["marker"] != "first" {
		t.Error("Start replaced a live daemon pod")
	}

	c.PrependReactor("get", "pods", failing(errAPI))
	if err := r.Start(ctx, d); !errors.Is(err, errAPI) {
		t.Errorf("Start when the existing pod cannot be read: %v", err)
	}
}

// A pod being deleted is no daemon: Start waits until it is gone, then
// creates a new one.
func TestPodRunnerStartReplacesAPodBeingDeleted(t *testing.T) {
	ctx := context.Background()
	r, c := newPodRunner("")
	d := (&MPS{Root: "/s/mps"}).Daemon(fakeUUID)
	old := r.Pod(d)
	now := metav1.Now()
	old.DeletionTimestamp = &now
	old.Finalizers = []string{"test/hold"}
	old.Annotations["marker"] = "old"
	if _, err := c.CoreV1().Pods(r.Namespace).Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := r.Running(ctx, d); ok {
		t.Fatal("a pod being deleted counts as running")
	}
	// The fake keeps the pod for a few looks after the delete, as the
	// kubelet does while the old daemon quits.
	gets := 0
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	c.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	c.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		if gets == 4 {
			name := a.(k8stesting.GetAction).GetName()
			if err := c.Tracker().Delete(gvr, r.Namespace, name); err != nil {
				t.Error(err)
			}
		}
		return false, nil, nil
	})
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	p, err := c.CoreV1().Pods(r.Namespace).Get(ctx, r.PodName(d.DeviceUUID), metav1.GetOptions{})
	if err != nil || p.Annotations["marker"] == "old" || p.DeletionTimestamp != nil {
		t.Fatalf("after Start: %v %v, want a new pod", p, err)
	}
}

// Stop returns only once the pod is gone; one that stays is an error when
// the caller's time runs out.
func TestPodRunnerStopOfAPodThatStays(t *testing.T) {
	r, c := newPodRunner("")
	d := (&MPS{Root: "/s/mps"}).Daemon(fakeUUID)
	if err := r.Start(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	c.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, nil })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := r.Stop(ctx, d)
	if err == nil || !strings.Contains(err.Error(), "still exists") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop of a pod that stays: %v", err)
	}
	// A daemon whose pod never existed stops at once.
	m := &MPS{Root: t.TempDir(), Runner: r}
	if err := m.Stop(m.Daemon("GPU-b")); err != nil {
		t.Errorf("Stop of a daemon without a pod: %v", err)
	}
	// Deleting a pod that is already gone is no error.
	c.PrependReactor("delete", "pods", failing(apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")))
	if err := r.Stop(context.Background(), d); err != nil {
		t.Errorf("Stop when the pod vanished: %v", err)
	}
}

// List finds this node's daemon pods only, by component label and
// spec.nodeName, and skips a pod without the device annotation.
func TestPodRunnerListSelectsThisNodesDaemons(t *testing.T) {
	ctx := context.Background()
	r, c := newPodRunner("")
	d := (&MPS{Root: "/s/mps"}).Daemon(fakeUUID)
	if err := r.Start(ctx, d); err != nil {
		t.Fatal(err)
	}
	stray := r.Pod((&MPS{Root: "/s/mps"}).Daemon("GPU-stray"))
	stray.Name = "stray"
	delete(stray.Annotations, DaemonDeviceAnnotation)
	otherApp := r.Pod((&MPS{Root: "/s/mps"}).Daemon("GPU-other"))
	otherApp.Name = "other-app"
	otherApp.Labels[DaemonComponentLabel] = "something-else"
	for _, p := range []*corev1.Pod{stray, otherApp} {
		if _, err := c.CoreV1().Pods(r.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var selector, fields string
	c.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		selector = a.(k8stesting.ListAction).GetListRestrictions().Labels.String()
		fields = a.(k8stesting.ListAction).GetListRestrictions().Fields.String()
		return false, nil, nil
	})
	names, err := r.List(ctx)
	if err != nil || !slices.Equal(names, []string{fakeUUID}) {
		t.Errorf("List = %v, %v; want only %s", names, err, fakeUUID)
	}
	if fields != "spec.nodeName=node-a" || selector != DaemonComponentLabel+"="+DaemonComponent {
		t.Errorf("List selected pods by %q and %q, want component and this node", selector, fields)
	}
}

func TestDaemonPodSpec(t *testing.T) {
	r, _ := newPodRunner("")
	r.PriorityClassName = "system-node-critical"
	d := (&MPS{Root: "/s/mps"}).Daemon(fakeUUID)
	p := r.Pod(d)
	if p.Spec.PriorityClassName != "system-node-critical" {
		t.Errorf("priority class %q", p.Spec.PriorityClassName)
	}
	if p.Annotations[DaemonDeviceAnnotation] != fakeUUID || p.Annotations[DaemonNodeAnnotation] != "node-a" || p.Labels[DaemonComponentLabel] != DaemonComponent {
		t.Errorf("labels %v annotations %v", p.Labels, p.Annotations)
	}
	// Named, so that Priority admission never gives it a cluster's
	// globalDefault class (issue 55).
	r.PriorityClassName = ""
	if got := r.Pod(d).Spec.PriorityClassName; got != DefaultPriorityClassName {
		t.Errorf("priority class %q without one set, want %s", got, DefaultPriorityClassName)
	}
	if *p.Spec.AutomountServiceAccountToken || p.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		t.Errorf("daemon pod mounts a token (%v) or does not restart (%s)", *p.Spec.AutomountServiceAccountToken, p.Spec.RestartPolicy)
	}
	if len(p.Spec.Tolerations) != 1 || p.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("tolerations %v, want all taints tolerated (the node's GPUs need their daemon)", p.Spec.Tolerations)
	}
	if n := len(r.PodName(d.DeviceUUID)); n > maxPodName {
		t.Errorf("pod name of %d characters", n)
	}
	// The old MIG UUID form has slashes: a valid pod name all the same.
	if name := r.PodName("MIG-GPU-1/2/3"); strings.ContainsAny(name, "/") {
		t.Errorf("pod name %q", name)
	}
}
