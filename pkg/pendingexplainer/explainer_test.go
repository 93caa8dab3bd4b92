// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package pendingexplainer

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const (
	driver  = "gpu.nvidia.com"
	node    = "vm"
	taint   = "gpu.nvidia.com/unhealthy=xid-79:NoSchedule"
	podKey  = "ns/p"
	other   = "other.example.com"
	wantDev = "vm/gpu-1 (" + taint + ")"
)

// cluster is a node with two simulated H100s, the shipped DeviceClasses,
// and a pod whose claim's selector fits only GPU 1.
type cluster struct {
	tainted  string // device that carries the taint, "" for none
	tolerate bool   // the request tolerates it
	reason   string // the pod's PodScheduled reason ("" for no condition)
	slicesOf string // driver that publishes the node's devices
	// dynamicMIG publishes the node as the driver does with dynamic MIG:
	// a slice of counters, untainted, and one of the devices.
	dynamicMIG bool
	// others are more nodes (profile othersProfile, dynamic MIG), not
	// tainted, whose GPU 1 other claims hold: the pod fits nowhere there.
	others        int
	othersProfile string
}

func defaults() cluster {
	return cluster{tainted: "gpu-1", reason: corev1.PodReasonUnschedulable, slicesOf: driver}
}

func (c cluster) objects(t testing.TB) []runtime.Object {
	t.Helper()
	_, inv, err := simulate.Discover("h100x2", node, filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{corev1.LabelHostname: node}}}}
	for i, s := range resourceslices.Objects(c.slicesOf, node, resourceslices.Build(node, inv, resourceslices.Options{DynamicMIG: c.dynamicMIG})) {
		s.Name = fmt.Sprintf("%s%d", s.GenerateName, i)
		for j := range s.Spec.Devices {
			if s.Spec.Devices[j].Name == c.tainted {
				s.Spec.Devices[j].Taints = []resourceapi.DeviceTaint{{Key: "gpu.nvidia.com/unhealthy", Value: "xid-79", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
			}
		}
		objs = append(objs, &s)
	}
	for i := range c.others {
		objs = append(objs, otherNode(t, fmt.Sprintf("node-%03d", i), c.othersProfile)...)
	}
	for _, dc := range schedtest.ShippedDeviceClasses(t) {
		objs = append(objs, dc)
	}
	class := "gpu.nvidia.com"
	sel := "device.attributes['gpu.nvidia.com'].index == 1"
	if c.slicesOf != driver {
		class, sel = "other-gpu", "device.attributes['other.example.com'].index == 1"
		objs = append(objs, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.driver == 'other.example.com'"}}}}})
	}
	req := schedtest.Request("gpu", class, 1, sel)
	if c.tolerate {
		req.Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: "gpu.nvidia.com/unhealthy", Operator: resourceapi.DeviceTolerationOpExists}}
	}
	claim := schedtest.Claim("c", req)
	claim.Namespace = "ns"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}},
			Containers:     []corev1.Container{{Name: "ctr", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if c.reason != "" {
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: c.reason,
			Message: "0/1 nodes are available: 1 cannot allocate all claims."}}
	}
	return append(objs, claim, pod)
}

// otherNode is an untainted node whose GPU 1 a claim holds.
func otherNode(t testing.TB, name, profile string) []runtime.Object {
	_, inv, err := simulate.Discover(profile, name, filepath.Join(t.TempDir(), "sim"))
	if err != nil {
		t.Fatal(err)
	}
	objs := []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}}
	for i, s := range resourceslices.Objects(driver, name, resourceslices.Build(name, inv, resourceslices.Options{DynamicMIG: true})) {
		s.Name = fmt.Sprintf("%s%d", s.GenerateName, i)
		objs = append(objs, &s)
	}
	holder := schedtest.Claim("holder-"+name, schedtest.Request("gpu", "gpu.nvidia.com", 1))
	holder.Namespace, holder.UID = "ns", types.UID("uid-holder-"+name)
	holder.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: driver, Pool: name, Device: "gpu-1"}}}}
	return append(objs, holder)
}

// start runs the explainer's informers (not its worker: the tests call
// sync) with events going to a FakeRecorder.
func start(t testing.TB, objs []runtime.Object) (*Explainer, *events.FakeRecorder, *testingclock.FakePassiveClock) {
	t.Helper()
	return startClient(t, fake.NewClientset(objs...))
}

func startClient(t testing.TB, client *fake.Clientset) (*Explainer, *events.FakeRecorder, *testingclock.FakePassiveClock) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	rec := events.NewFakeRecorder(10)
	clk := testingclock.NewFakePassiveClock(time.Now())
	e, err := New(ctx, Config{DriverName: driver, Client: client, Recorder: rec, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	e.podInf.Start(ctx.Done())
	e.inf.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		e.queue.ShutDown()
		e.podInf.Shutdown()
		e.inf.Shutdown()
	})
	if !cache.WaitForCacheSync(ctx.Done(), e.synced...) {
		t.Fatal("caches did not sync")
	}
	return e, rec, clk
}

func recorded(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func syncPod(t *testing.T, e *Explainer) {
	t.Helper()
	if err := e.sync(context.Background(), podKey); err != nil {
		t.Fatal(err)
	}
}

// A pod that fits only GPU 1, which is tainted, gets one Warning naming
// the device and the taint; every other state gets none.
func TestExplainer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*cluster)
		want   bool
	}{
		{name: "the only GPU it fits is tainted", want: true},
		{name: "no taint", change: func(c *cluster) { c.tainted = "" }},
		{name: "the request tolerates the taint", change: func(c *cluster) { c.tolerate = true }},
		{name: "the GPU it does not fit is tainted", change: func(c *cluster) { c.tainted = "gpu-0" }},
		{name: "not tried by the scheduler yet", change: func(c *cluster) { c.reason = "" }},
		{name: "scheduling gated", change: func(c *cluster) { c.reason = corev1.PodReasonSchedulingGated }},
		{name: "claim of another driver", change: func(c *cluster) { c.slicesOf = other }},
		{name: "more nodes, untainted, their GPU 1 held", change: func(c *cluster) { c.others, c.othersProfile = 3, "h100x2" }, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults()
			if tc.change != nil {
				tc.change(&c)
			}
			e, rec, _ := start(t, c.objects(t))
			syncPod(t, e)
			got := recorded(rec)
			if !tc.want {
				if len(got) != 0 {
					t.Errorf("events %q, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("events %q, want one", got)
			}
			for _, s := range []string{"Warning " + Reason + " ", "claim ns/c, request gpu", wantDev, "Wait for the GPU to recover, or tolerate the taint"} {
				if !strings.Contains(got[0], s) {
					t.Errorf("event %q lacks %q", got[0], s)
				}
			}
		})
	}
}

// The same state seen again posts nothing new until MinRepeat has passed;
// a pod that was scheduled in between starts afresh.
func TestExplainerRepeats(t *testing.T) {
	e, rec, clk := start(t, defaults().objects(t))
	syncPod(t, e)
	syncPod(t, e)
	if got := recorded(rec); len(got) != 1 {
		t.Fatalf("after two looks at the same state: events %q, want one", got)
	}
	clk.SetTime(clk.Now().Add(30 * time.Second))
	syncPod(t, e)
	if got := recorded(rec); len(got) != 0 {
		t.Fatalf("30 s later: events %q, want none", got)
	}
	clk.SetTime(clk.Now().Add(31 * time.Second))
	syncPod(t, e)
	if got := recorded(rec); len(got) != 1 {
		t.Fatalf("61 s after the first: events %q, want one more", got)
	}
	e.podGone(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}})
	syncPod(t, e)
	if got := recorded(rec); len(got) != 1 {
		t.Fatalf("after the pod was forgotten: events %q, want one more", got)
	}
}

// Through the informers, the queue and the events.k8s.io recorder to the
// API: the Event a user's `kubectl events` shows.
func TestExplainerPostsTheEvent(t *testing.T) {
	c := defaults()
	objs := c.objects(t)
	client := fake.NewClientset(objs[:len(objs)-1]...) // the pod comes later
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	if err := broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer broadcaster.Shutdown()
	e, err := New(ctx, Config{DriverName: driver, Client: client, Recorder: broadcaster.NewRecorder(scheme(), ReportingController)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- e.Run(ctx) }()
	pod := objs[len(objs)-1].(*corev1.Pod)
	if _, err := client.CoreV1().Pods("ns").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		list, err := client.EventsV1().Events("ns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got = nil
		for _, ev := range list.Items {
			got = append(got, fmt.Sprintf("%s %s %s %s %s/%s %s", ev.Type, ev.Reason, ev.Action, ev.ReportingController, ev.Regarding.Kind, ev.Regarding.Name, ev.Note))
			if ev.Related == nil || ev.Related.Kind != "ResourceSlice" {
				t.Errorf("related %+v, want the ResourceSlice that carries the taint", ev.Related)
			}
		}
		if len(got) > 0 {
			break
		}
	}
	want := "Warning " + Reason + " " + Action + " " + ReportingController + " Pod/p "
	if len(got) != 1 || !strings.HasPrefix(got[0], want) || !strings.Contains(got[0], wantDev) {
		t.Errorf("events %q, want one starting %q naming %s", got, want, wantDev)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestMessage(t *testing.T) {
	var devs []clusterview.TaintedDevice
	for i := range 8 {
		devs = append(devs, clusterview.TaintedDevice{Driver: driver, Node: node, Pool: node, Device: fmt.Sprintf("gpu-%d", i), Taints: []string{taint}})
	}
	msg := Message([]clusterview.TaintBlock{{Claim: "ns/c", PodClaim: "gpu", Request: "gpus", Devices: devs}})
	want := "Device taints keep this pod from being scheduled: claim ns/c, request gpus: the devices it could get are tainted: " +
		"vm/gpu-0 (" + taint + "), vm/gpu-1 (" + taint + "), vm/gpu-2 (" + taint + "), vm/gpu-3 (" + taint + "), and 4 more. " +
		"Wait for the GPU to recover, or tolerate the taint in the request (tolerations in spec.devices.requests[].exactly)."
	if msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
	var blocks []clusterview.TaintBlock
	for i := range 20 {
		blocks = append(blocks, clusterview.TaintBlock{Claim: fmt.Sprintf("ns/claim-with-a-long-name-%d", i), Request: "gpu", Devices: devs[:1]})
	}
	if msg := Message(blocks); len(msg) > maxNote || !strings.HasSuffix(msg, "…") {
		t.Errorf("%d bytes, want at most %d, cut with …", len(msg), maxNote)
	}
}

func scheme() *runtime.Scheme { return clientsetscheme.Scheme }

// The taint scope: only this driver's slices with a NoSchedule or NoExecute
// taint put a node (or a node-less pool) in it, and a node in it brings
// every driver's slices of that node.
func TestTaintScope(t *testing.T) {
	slice := func(drv, node, pool string, effect resourceapi.DeviceTaintEffect) *resourceapi.ResourceSlice {
		s := &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: drv, Pool: resourceapi.ResourcePool{Name: pool}}}
		if node != "" {
			s.Spec.NodeName = &node
		}
		d := resourceapi.Device{Name: "d"}
		if effect != "" {
			d.Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: effect}}
		}
		s.Spec.Devices = []resourceapi.Device{d}
		return s
	}
	all := []*resourceapi.ResourceSlice{
		slice(driver, "a", "a", resourceapi.DeviceTaintEffectNoSchedule),
		slice(driver, "b", "b", ""),
		slice(other, "c", "c", resourceapi.DeviceTaintEffectNoExecute),
		slice(driver, "", "fabric", resourceapi.DeviceTaintEffectNoExecute),
		slice(driver, "d", "d", resourceapi.DeviceTaintEffectNone),
	}
	sc := taintScope(driver, all)
	var held []string
	for _, s := range append(all, slice(other, "a", "a-other", "")) {
		if sc.holds(s) {
			held = append(held, s.Spec.Pool.Name)
		}
	}
	if got := strings.Join(held, " "); got != "a fabric a-other" {
		t.Errorf("in scope: %q, want node a's slices of every driver and the tainted node-less pool", got)
	}
	if taintScope(driver, all[1:3]).empty() != true {
		t.Error("another driver's taint put this driver's explainer to work")
	}
}

// BenchmarkSync is one look at an Unschedulable pod: the one node with a
// tainted GPU among untainted nodes of eight H100s with dynamic MIG.
func BenchmarkSync(b *testing.B) {
	for _, others := range []int{0, 10, 100} {
		b.Run(fmt.Sprintf("nodes=%d", others+1), func(b *testing.B) {
			c := defaults()
			c.others, c.othersProfile = others, "h100x8"
			e, rec, _ := start(b, c.objects(b))
			if err := e.sync(context.Background(), podKey); err != nil {
				b.Fatal(err)
			}
			if got := recorded(rec); len(got) != 1 {
				b.Fatalf("events %q, want one", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := e.sync(context.Background(), podKey); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
