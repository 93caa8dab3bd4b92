// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The take-over of NVIDIA's MPS claims (issue 58, defect 1): with
// takeover.nvidiaNamespace the plugin may delete NVIDIA's MPS control
// daemon Deployments of its own node in that namespace, and nothing else
// of Deployments anywhere (templates/takeover.yaml).

const nvidiaNS = "nvidia-dra-driver-gpu"

var takeoverSet = []string{"takeover.nvidiaNamespace=" + nvidiaNS}

// nvidiaDaemon is the Deployment NVIDIA's plugin makes for an MPS control
// daemon (templates/mps-control-daemon.tmpl.yaml at 95932046).
func nvidiaDaemon(node string) *appsv1.Deployment {
	name := "mps-control-daemon-5e0b7c1a-1c4f-4b51-9a55-0d1f3e1c0b01-e74c8"
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: nvidiaNS, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{NodeName: node, HostPID: true, Containers: []corev1.Container{{Name: "mps-control-daemon", Image: "nvcr.io/nvidia/k8s-dra-driver-gpu"}}},
			},
		},
	}
}

// TestChartTakeoverRBAC: the Role in NVIDIA's namespace grants delete of
// Deployments alone, bound to the plugin's ServiceAccount only; without the
// value nothing is rendered and the plugin is not told a namespace.
func TestChartTakeoverRBAC(t *testing.T) {
	var role rbacv1.Role
	renderKind(t, "Role", "-nvidia-mps-takeover", &role, takeoverSet...)
	if role.Namespace != nvidiaNS {
		t.Errorf("Role in namespace %q, want NVIDIA's %q", role.Namespace, nvidiaNS)
	}
	got := rules(t, rbacv1.ClusterRole{Rules: role.Rules})
	want := []string{rule(rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"delete"}})}
	if !slices.Equal(got, want) {
		t.Errorf("take-over Role rules\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	var binding rbacv1.RoleBinding
	renderKind(t, "RoleBinding", "-nvidia-mps-takeover", &binding, takeoverSet...)
	if binding.Namespace != nvidiaNS || binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name ||
		len(binding.Subjects) != 1 || binding.Subjects[0].Name != "gpu-dra-driver-kubelet-plugin" || binding.Subjects[0].Namespace != "gpu-dra-driver" {
		t.Errorf("take-over RoleBinding %+v, want the plugin's ServiceAccount bound to %s in %s", binding, role.Name, nvidiaNS)
	}
	if v, ok := flag(plugin(t, render(t, takeoverSet...)), "--reference-driver-namespace"); !ok || v != nvidiaNS {
		t.Errorf("--reference-driver-namespace %q (%v), want %s", v, ok, nvidiaNS)
	}

	// Every binding of the plugin's ServiceAccount with the value set:
	// the default ones and this one, nothing else.
	bound := pluginBindings(helmTemplate(t, takeoverSet...))
	wantBound := []string{
		"ClusterRoleBinding /gpu-dra-driver-kubelet-plugin -> ClusterRole gpu-dra-driver-kubelet-plugin",
		"RoleBinding gpu-dra-driver/gpu-dra-driver-mps-daemons -> Role gpu-dra-driver-mps-daemons",
		"RoleBinding " + nvidiaNS + "/gpu-dra-driver-nvidia-mps-takeover -> Role gpu-dra-driver-nvidia-mps-takeover",
	}
	if !slices.Equal(bound, wantBound) {
		t.Errorf("bindings of the plugin's ServiceAccount\n got %s\nwant %s", strings.Join(bound, "\n     "), strings.Join(wantBound, "\n     "))
	}

	out := string(helmTemplate(t))
	if strings.Contains(out, "nvidia-mps-takeover") {
		t.Error("the take-over's Role or policy is rendered without takeover.nvidiaNamespace")
	}
	if v, ok := flag(plugin(t, render(t)), "--reference-driver-namespace"); ok {
		t.Errorf("--reference-driver-namespace=%q without takeover.nvidiaNamespace", v)
	}
}

// TestChartTakeoverPolicyAdmitsOnlyNVIDIAsDaemonsOfItsNode: the policy
// admits the delete the plugin makes (pkg/driver reference_undo.go
// stopMPS), of the Deployment NVIDIA's template makes, and refuses every
// other write of the plugin's token to a Deployment.
func TestChartTakeoverPolicyAdmitsOnlyNVIDIAsDaemonsOfItsNode(t *testing.T) {
	var policy admissionv1.ValidatingAdmissionPolicy
	renderKind(t, "ValidatingAdmissionPolicy", "-nvidia-mps-takeover", &policy, takeoverSet...)
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", policy.Spec.FailurePolicy)
	}
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	renderKind(t, "ValidatingAdmissionPolicyBinding", "-nvidia-mps-takeover", &binding, takeoverSet...)
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %+v, want Deny for %s", binding.Spec, policy.Name)
	}

	del := func(dep *appsv1.Deployment, node string) admissionRequest {
		return admissionRequest{operation: "DELETE", username: pluginUser, nodeName: node, oldObject: dep}
	}
	if matched, denials := admit(t, policy, del(nvidiaDaemon(ownNode), ownNode)); !matched || len(denials) > 0 {
		t.Errorf("delete of NVIDIA's MPS daemon of its own node: matched %v, denied %v", matched, denials)
	}
	if matched, _ := admit(t, policy, admissionRequest{operation: "DELETE", username: "system:serviceaccount:kube-system:deployment-controller", oldObject: nvidiaDaemon(ownNode)}); matched {
		t.Error("the policy matches other users' requests")
	}
	elsewhere := nvidiaDaemon(ownNode)
	elsewhere.Namespace = "gpu-dra-driver"
	unlabeled := nvidiaDaemon(ownNode)
	unlabeled.Labels = map[string]string{"app": "other"}
	renamed := nvidiaDaemon(ownNode)
	renamed.Name, renamed.Labels = "coredns", map[string]string{"app": "coredns"}
	unpinned := nvidiaDaemon(ownNode)
	unpinned.Spec.Template.Spec.NodeName = ""
	for _, bad := range []struct {
		what string
		req  admissionRequest
		want string
	}{
		{"another node's daemon", del(nvidiaDaemon(otherNode), ownNode), "deletes only the MPS control daemons of its own node, not mps-control-daemon-"},
		{"a daemon's name in another namespace", del(elsewhere, ownNode), "only in NVIDIA's namespace " + nvidiaNS + ", not in gpu-dra-driver"},
		{"a daemon without its label", del(unlabeled, ownNode), "deletes only NVIDIA's MPS control daemon Deployments"},
		{"another Deployment", del(renamed, ownNode), "not coredns"},
		{"a Deployment pinned to no node", del(unpinned, ownNode), "of node (none)"},
		{"a token without a node", del(nvidiaDaemon(ownNode), ""), "this token carries no node"},
		{"a create", admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: nvidiaDaemon(ownNode)}, "it may not CREATE one"},
		{"an update", admissionRequest{operation: "UPDATE", username: pluginUser, nodeName: ownNode, object: nvidiaDaemon(ownNode), oldObject: nvidiaDaemon(ownNode)}, "it may not UPDATE one"},
	} {
		matched, denials := admit(t, policy, bad.req)
		requireDenied(t, bad.what, matched, denials, bad.want)
	}
}
