// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/pendingexplainer"
)

const explainerUser = "system:serviceaccount:gpu-dra-driver:" + explainerLease

// The pending explainer's token writes only its own Events (issue 46): a
// Warning DeviceTaintsBlockScheduling from its reporting controller about
// a Pod in the Event's namespace, related to a ResourceSlice or nothing.
func TestChartExplainerEventsPolicy(t *testing.T) {
	var policy admissionv1.ValidatingAdmissionPolicy
	renderKind(t, "ValidatingAdmissionPolicy", "-pending-explainer-events", &policy)
	own := func() *eventsv1.Event {
		return &eventsv1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: "train.1", Namespace: "team-a"},
			Regarding:           corev1.ObjectReference{Kind: "Pod", Namespace: "team-a", Name: "train", APIVersion: "v1"},
			Related:             &corev1.ObjectReference{Kind: "ResourceSlice", Name: "node-a-gpu", APIVersion: "resource.k8s.io/v1"},
			Reason:              pendingexplainer.Reason,
			Action:              pendingexplainer.Action,
			Type:                corev1.EventTypeWarning,
			ReportingController: pendingexplainer.ReportingController,
			ReportingInstance:   "explainer-0",
			Note:                "device taints block",
		}
	}
	for _, op := range []string{"CREATE", "UPDATE"} {
		if matched, denials := admit(t, policy, admissionRequest{operation: op, username: explainerUser, object: own()}); !matched || len(denials) > 0 {
			t.Errorf("%s of the explainer's own Event: matched %v, denied %v", op, matched, denials)
		}
		noRelated := own()
		noRelated.Related = nil
		if matched, denials := admit(t, policy, admissionRequest{operation: op, username: explainerUser, object: noRelated}); !matched || len(denials) > 0 {
			t.Errorf("%s of the explainer's Event without a related object: matched %v, denied %v", op, matched, denials)
		}
	}
	attacks := []struct {
		name   string
		mutate func(e *eventsv1.Event)
		want   string
	}{
		// Issue 46: a spoofed kubelet Warning about another node in kube-system.
		{"SpoofedKubeletWarningOnANode", func(e *eventsv1.Event) {
			e.Namespace = "kube-system"
			e.Regarding = corev1.ObjectReference{Kind: "Node", Name: "node-b", APIVersion: "v1"}
			e.ReportingController, e.Reason = "kubelet", "NodeNotReady"
		}, "reports only on a Pending Pod"},
		{"PodOfAnotherNamespace", func(e *eventsv1.Event) { e.Regarding.Namespace = "kube-system" }, "in the Pod's namespace"},
		{"OtherController", func(e *eventsv1.Event) { e.ReportingController = "kubelet" }, "from gpu.nvidia.com/pending-explainer"},
		{"OtherReason", func(e *eventsv1.Event) { e.Reason = "Evicted" }, "Warning DeviceTaintsBlockScheduling"},
		{"RelatedNode", func(e *eventsv1.Event) {
			e.Related = &corev1.ObjectReference{Kind: "Node", Name: "node-b", APIVersion: "v1"}
		}, "relate only to a ResourceSlice"},
	}
	for _, a := range attacks {
		e := own()
		a.mutate(e)
		matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: explainerUser, object: e})
		requireDenied(t, a.name, matched, denials, a.want)
	}
	if matched, _ := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, object: own()}); matched {
		t.Error("the explainer's events policy matched another user")
	}
}
