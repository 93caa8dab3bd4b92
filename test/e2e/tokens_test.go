// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// The chart's pending explainer (templates/pending-explainer.yaml).
const explainerSA = webhookName + "-pending-explainer"

// asServiceAccount is a client the API server takes for ServiceAccount sa
// of the release namespace (no node: these tokens are not pod-bound to a
// GPU node's plugin).
func asServiceAccount(t *testing.T, sa string) (kubernetes.Interface, *rest.Config) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + driverNS + ":" + sa,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + driverNS, "system:authenticated"},
	}
	return kubernetes.NewForConfigOrDie(cfg), cfg
}

// TestStolenTokensIssue46 tries, with server-side dry runs as each of the
// chart's tokens, what issue 46 found open: another program run as the
// MPS daemon (a host path reached through the plugin's own shm link over
// /usr/bin, a subPath over the binary), a daemon pod at
// system-node-critical with huge requests, a slice in another node's pool,
// a v1beta1 monitor claim without adminAccess, a spoofed kubelet Warning
// in kube-system, and the webhook's token listing every pod.
func TestStolenTokensIssue46(t *testing.T) {
	ctx := context.Background()
	node := runningPluginPod(t).Spec.NodeName
	plugin := asPlugin(t, node)
	pods := plugin.CoreV1().Pods(driverNS)
	legit := daemonPodShape(t, node)
	uuid := legit.Annotations["gpu.nvidia.com/mps-device"]
	daemonAttacks := []struct {
		name   string
		mutate func(*corev1.Pod)
	}{
		{"ShmLinkOverUsrBin", func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "bin", VolumeSource: corev1.VolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(stateDir(), "mps", uuid, "shm")}}})
			c := &p.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "bin", MountPath: "/usr/bin"})
		}},
		{"SubPathOverTheBinary", func(p *corev1.Pod) {
			c := &p.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "mps", MountPath: "/usr/bin/gpu-kubelet-plugin", SubPath: "daemon.pid"})
		}},
		// Bidirectional needs a privileged container (the API server
		// refuses it otherwise); any propagation is refused by the policy.
		{"MountPropagation", func(p *corev1.Pod) {
			p.Spec.Containers[0].VolumeMounts[0].MountPropagation = ptr.To(corev1.MountPropagationHostToContainer)
		}},
		{"SystemNodeCriticalHugeRequests", func(p *corev1.Pod) {
			p.Spec.PriorityClassName = "system-node-critical"
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("1Ti")}
		}},
		{"ShellPayloadInAFlag", func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = append(p.Spec.Containers[0].Args, "--default-active-thread-percentage=$(id)")
		}},
		{"Finalizer", func(p *corev1.Pod) { p.Finalizers = []string{"example.com/never"} }},
	}
	for _, a := range daemonAttacks {
		t.Run("PluginToken/Refuses"+a.name, func(t *testing.T) {
			p := legit.DeepCopy()
			a.mutate(p)
			_, err := pods.Create(ctx, p, dryRun)
			refusedBy(t, err, podPolicyName, "daemon pod with "+a.name)
		})
	}

	t.Run("PluginToken/RefusesSliceInAnotherNodesPool", func(t *testing.T) {
		s := &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-probe-"},
			Spec: resourceapi.ResourceSliceSpec{Driver: driverName, NodeName: ptr.To(node),
				Pool:    resourceapi.ResourcePool{Name: node + "-other", ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "gpu-0"}}},
		}
		_, err := plugin.ResourceV1().ResourceSlices().Create(ctx, s, dryRun)
		refusedBy(t, err, slicePolicyName, "slice of node "+node+" in pool "+node+"-other")
	})

	t.Run("V1beta1MonitorClaimWithoutAdminAccess", func(t *testing.T) {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		dyn := dynamic.NewForConfigOrDie(cfg)
		claim := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
			"metadata": map[string]any{"name": "monitor-no-admin", "namespace": "default"},
			"spec": map[string]any{"devices": map[string]any{"requests": []any{
				map[string]any{"name": "m", "deviceClassName": "monitor." + driverName}}}},
		}}
		gvr := schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1beta1", Resource: "resourceclaims"}
		_, err = dyn.Resource(gvr).Namespace("default").Create(ctx, claim, dryRun)
		switch {
		case apierrors.IsNotFound(err) || (err != nil && strings.Contains(err.Error(), "the server could not find the requested resource")):
			// The cluster serves what Kubernetes 1.38 serves: no v1beta1
			// at all, so the old shape cannot be written.
			t.Logf("resource.k8s.io/v1beta1 is not served: %v", err)
		default:
			refusedBy(t, err, "gpu-dra-driver-monitor-admin-access", "a v1beta1 monitor claim without adminAccess")
		}
	})

	webhook, _ := asServiceAccount(t, webhookName)
	t.Run("WebhookToken/CannotListPods", func(t *testing.T) {
		for _, ns := range []string{"", driverNS, "kube-system"} {
			review, err := webhook.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
				Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Verb: "list", Resource: "pods"}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if review.Status.Allowed {
				t.Errorf("the webhook's ServiceAccount may list pods in namespace %q (kubectl auth can-i list pods says yes)", ns)
			}
		}
		if _, err := webhook.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
			t.Errorf("listing every pod with the webhook's token: %v, want Forbidden", err)
		}
	})

	spoof := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "spoof-", Namespace: "kube-system"},
		Regarding:  corev1.ObjectReference{Kind: "Node", Name: node + "-other", APIVersion: "v1"},
		Reason:     "NodeNotReady", Action: "Status", Type: corev1.EventTypeWarning, Note: "spoofed",
		ReportingController: "kubelet", ReportingInstance: node, EventTime: metav1.NowMicro(),
	}
	t.Run("WebhookToken/RefusesSpoofedKubeletEvent", func(t *testing.T) {
		if _, err := webhook.EventsV1().Events("kube-system").Create(ctx, spoof.DeepCopy(), dryRun); !apierrors.IsForbidden(err) {
			t.Errorf("a spoofed kubelet Warning in kube-system with the webhook's token: %v, want Forbidden", err)
		}
	})
	explainer, _ := asServiceAccount(t, explainerSA)
	t.Run("ExplainerToken/RefusesSpoofedKubeletEvent", func(t *testing.T) {
		_, err := explainer.EventsV1().Events("kube-system").Create(ctx, spoof.DeepCopy(), dryRun)
		refusedBy(t, err, explainerSA+"-events", "a spoofed kubelet Warning in kube-system with the explainer's token")
	})
	t.Run("ExplainerToken/OwnEventAccepted", func(t *testing.T) {
		own := &eventsv1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "pending-", Namespace: "default"},
			Regarding:  corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: "pending", APIVersion: "v1"},
			Reason:     "DeviceTaintsBlockScheduling", Action: "Scheduling", Type: corev1.EventTypeWarning, Note: "dry run",
			ReportingController: "gpu.nvidia.com/pending-explainer", ReportingInstance: "e2e", EventTime: metav1.NowMicro(),
		}
		if _, err := explainer.EventsV1().Events("default").Create(ctx, own, dryRun); err != nil {
			t.Errorf("the explainer's own kind of Event was refused: %v", err)
		}
	})
}
