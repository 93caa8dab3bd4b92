// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

const (
	pluginMetricsText = "# TYPE gpu_dra_prepared_devices gauge\ngpu_dra_prepared_devices 0\n" +
		"# TYPE gpu_dra_errors_total counter\ngpu_dra_errors_total{operation=\"prepare\"} 2\n" +
		"# TYPE go_goroutines gauge\ngo_goroutines 42\n"
	kubeletMetricsText = "# TYPE plugin_manager_total_plugins gauge\n" +
		"plugin_manager_total_plugins{socket_path=\"/var/lib/kubelet/plugins_registry/gpu.nvidia.com-reg.sock\",state=\"actual_state_of_world\"} 1\n" +
		"# TYPE kubelet_running_pods gauge\nkubelet_running_pods 7\n"
)

// rawResponse answers a pod proxy request.
type rawResponse struct {
	body []byte
	err  error
}

func (r rawResponse) DoRaw(context.Context) ([]byte, error) { return r.body, r.err }
func (r rawResponse) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(r.body))), r.err
}

// gatherClient is the fake clientset with what it lacks: field selectors
// on events, and, to catch any request through the API server's proxy,
// the plugin's /metrics behind the pod proxy (recorded) and a REST client
// whose requests a test server sees.
type gatherClient struct {
	*fake.Clientset
	core typedcorev1.CoreV1Interface
}

func (c gatherClient) CoreV1() typedcorev1.CoreV1Interface { return c.core }

type coreWithREST struct {
	typedcorev1.CoreV1Interface
	rest rest.Interface
}

func (c coreWithREST) RESTClient() rest.Interface { return c.rest }

func newGatherClient(t *testing.T, kubelet http.HandlerFunc, objs ...runtime.Object) (gatherClient, *[]string) {
	t.Helper()
	cs := fake.NewClientset(objs...)
	cs.PrependReactor("list", "events", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a := action.(k8stesting.ListAction)
		all, err := cs.Tracker().List(a.GetResource(), corev1.SchemeGroupVersion.WithKind("Event"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		out := &corev1.EventList{}
		for _, e := range all.(*corev1.EventList).Items {
			set := fields.Set{"involvedObject.kind": e.InvolvedObject.Kind, "involvedObject.name": e.InvolvedObject.Name}
			if a.GetListRestrictions().Fields.Matches(set) {
				out.Items = append(out.Items, e)
			}
		}
		return true, out, nil
	})
	var proxied []string
	cs.PrependProxyReactor("pods", func(action k8stesting.Action) (bool, rest.ResponseWrapper, error) {
		a := action.(k8stesting.ProxyGetAction)
		proxied = append(proxied, a.GetNamespace()+"/"+a.GetName()+":"+a.GetPort()+a.GetPath())
		return true, rawResponse{body: []byte(pluginMetricsText)}, nil
	})
	srv := httptest.NewServer(kubelet)
	t.Cleanup(srv.Close)
	rc, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, APIPath: "/api", ContentConfig: rest.ContentConfig{
		GroupVersion: &corev1.SchemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
	}})
	if err != nil {
		t.Fatal(err)
	}
	return gatherClient{Clientset: cs, core: coreWithREST{CoreV1Interface: cs.CoreV1(), rest: rc}}, &proxied
}

func serveKubeletMetrics(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/nodes/vm/proxy/metrics" {
		http.NotFound(w, r)
		return
	}
	_, _ = io.WriteString(w, kubeletMetricsText)
}

// gatherObjects: a node vm with the plugin, a pod p there whose claim
// comes from a template, another pod q, and events of both.
func gatherObjects() []runtime.Object {
	pluginLabels, _ := labels.ConvertSelectorToLabelsMap(clusterview.PluginSelector)
	warning := func(name, kind, obj, msg string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Type: corev1.EventTypeWarning,
			InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: "ns", Name: obj}, Reason: "FailedPrepareDynamicResources", Message: msg, Count: 1}
	}
	return []runtime.Object{
		&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "vm-gpu.nvidia.com-0"}, Spec: resourceapi.ResourceSliceSpec{
			Driver: "gpu.nvidia.com", NodeName: ptr.To("vm"), Pool: resourceapi.ResourcePool{Name: "vm", ResourceSliceCount: 1},
			Devices: []resourceapi.Device{{Name: "gpu-0"}},
		}},
		&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "gpu.nvidia.com"}},
		&resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "one-gpu", Namespace: "ns"}},
		&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "p-gpu-x", Namespace: "ns"}, Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "gpu", Driver: "gpu.nvidia.com", Pool: "vm", Device: "gpu-0"},
			}}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p"}},
		}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gpu-dra-driver-kubelet-plugin-abcde", Namespace: "gpu-dra-driver", Labels: pluginLabels},
			Spec:   corev1.PodSpec{NodeName: "vm", Containers: []corev1.Container{{Name: "plugin", Args: []string{"--http-endpoint=:9555"}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "gpu-dra-driver-kubelet-plugin", Namespace: "gpu-dra-driver", Labels: pluginLabels}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "vm",
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}},
			Status: corev1.PodStatus{Phase: corev1.PodPending, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x")}}}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}},
		warning("p.1", "Pod", "p", "Failed to prepare dynamic resources: NodePrepareResources failed for ResourceClaim p-gpu-x: prepare claim ns/p-gpu-x: prepare step cdi: write CDI spec: disk full"),
		warning("q.1", "Pod", "q", "not this pod's"),
	}
}

func TestGatherPod(t *testing.T) {
	cs, proxied := newGatherClient(t, serveKubeletMetrics, gatherObjects()...)
	s, err := clusterview.Gather(context.Background(), cs, "gpu.nvidia.com", clusterview.Target{Kind: "pod", Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{clusterview.MetricsNotRead("vm")}; !slices.Equal(s.Unreadable, want) {
		t.Errorf("unreadable: %q, want %q", s.Unreadable, want)
	}
	counts := map[string][2]int{
		"slices": {len(s.Slices), 1}, "classes": {len(s.DeviceClasses), 1}, "claims": {len(s.Claims), 1}, "nodes": {len(s.Nodes), 1},
		"plugin pods": {len(s.PluginPods), 1}, "daemonsets": {len(s.PluginDaemonSets), 1}, "pods": {len(s.Pods), 1},
		"templates": {len(s.ClaimTemplates), 1}, "events": {len(s.Events), 1},
	}
	for what, c := range counts {
		if c[0] != c[1] {
			t.Errorf("%s: %d, want %d", what, c[0], c[1])
		}
	}
	if len(s.Events) == 1 && s.Events[0].InvolvedObject.Name != "p" {
		t.Errorf("events of another object: %+v", s.Events)
	}
	if len(s.PluginPods) == 1 && s.PluginPods[0].Name != "gpu-dra-driver-kubelet-plugin-abcde" {
		t.Errorf("plugin pods: %s", s.PluginPods[0].Name)
	}
	if len(*proxied) != 0 {
		t.Errorf("pod proxy requests %q", *proxied)
	}
	// What was gathered is enough for the diagnosis; registration is not
	// known without the metrics (TestGatherReadsNothingThroughAProxy).
	r := DiagnosePod(s, "ns", "p")
	if r.Prepare == nil || r.Prepare.Registered != "unknown" || r.Prepare.Step != "cdi" {
		t.Errorf("diagnosis of the gathered state: %s, prepare %+v", r.Verdict, r.Prepare)
	}
}

func TestGatherNode(t *testing.T) {
	cs, _ := newGatherClient(t, http.NotFound, gatherObjects()...)
	s, err := clusterview.Gather(context.Background(), cs, "gpu.nvidia.com", clusterview.Target{Kind: "node", Name: "vm"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 0 || len(s.Events) != 0 || len(s.PluginPods) != 1 {
		t.Errorf("pods %d, events %d, plugin pods %d", len(s.Pods), len(s.Events), len(s.PluginPods))
	}
	if want := []string{clusterview.MetricsNotRead("vm")}; !slices.Equal(s.Unreadable, want) {
		t.Errorf("unreadable: %q, want %q", s.Unreadable, want)
	}
}

func TestGatherErrors(t *testing.T) {
	forbidden := func(resource string) k8stesting.ReactionFunc {
		return func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(resourceapi.Resource(resource), "", errors.New("RBAC"))
		}
	}
	cs, _ := newGatherClient(t, serveKubeletMetrics, gatherObjects()...)
	cs.PrependReactor("list", "resourceslices", forbidden("resourceslices"))
	if _, err := clusterview.Gather(context.Background(), cs, "gpu.nvidia.com", clusterview.Target{Kind: "node", Name: "vm"}); err == nil || !strings.Contains(err.Error(), "list ResourceSlices") {
		t.Errorf("without slices: %v", err)
	}

	cs, _ = newGatherClient(t, serveKubeletMetrics, gatherObjects()...)
	cs.PrependReactor("list", "deviceclasses", forbidden("deviceclasses"))
	s, err := clusterview.Gather(context.Background(), cs, "gpu.nvidia.com", clusterview.Target{Kind: "pod", Namespace: "ns", Name: "missing"})
	if err == nil || !strings.Contains(err.Error(), "get pod ns/missing") {
		t.Errorf("missing pod: %v", err)
	}
	if s == nil || len(s.Unreadable) != 1 || !strings.HasPrefix(s.Unreadable[0], "DeviceClasses: ") {
		t.Errorf("unreadable classes not reported: %+v", s)
	}
}

// TestGatherPendingPodReadsBoundPods: for a Pending pod, Gather also reads
// the pods bound to nodes and not ended (the API server filters by the
// field selector Gather sends; the reactor plays it), slimmed to their
// requests, so that NodeResourcesFit sees each node's room.
func TestGatherPendingPodReadsBoundPods(t *testing.T) {
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	busy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: "other", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{NodeName: "vm", Containers: []corev1.Container{{Name: "c", Image: "big:1", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	done := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "done", Namespace: "other"}, Spec: corev1.PodSpec{NodeName: "vm"},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}
	cs, _ := newGatherClient(t, serveKubeletMetrics, pending, busy, done, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vm"}})
	cs.Clientset.PrependReactor("list", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a := action.(k8stesting.ListAction)
		fs := a.GetListRestrictions().Fields
		if fs == nil || fs.Empty() {
			return false, nil, nil
		}
		out := &corev1.PodList{}
		for _, p := range []*corev1.Pod{pending, busy, done} {
			if fs.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}) {
				out.Items = append(out.Items, *p)
			}
		}
		return true, out, nil
	})
	s, err := clusterview.Gather(context.Background(), cs, "gpu.nvidia.com", clusterview.Target{Kind: "pod", Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range s.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if want := []string{"ns/p", "other/busy"}; !slices.Equal(names, want) {
		t.Fatalf("pods %q, want %q", names, want)
	}
	b := s.Pods[1]
	if b.Labels != nil || b.Spec.Containers[0].Image != "" || b.Spec.Containers[0].Resources.Requests.Cpu().String() != "7" || b.Spec.NodeName != "vm" {
		t.Errorf("bound pod not slimmed to its requests: %+v", b)
	}
}
