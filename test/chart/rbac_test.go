// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// renderKind runs helm template and decodes (strictly) the one document of
// the given kind whose name ends with suffix.
func renderKind(t *testing.T, kind, suffix string, into any, set ...string) {
	t.Helper()
	out := helmTemplate(t, set...)
	var found []string
	for _, doc := range strings.Split(string(out), "\n---") {
		var meta struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind != kind {
			continue
		}
		found = append(found, meta.Metadata.Name)
		if strings.HasSuffix(meta.Metadata.Name, suffix) {
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("%s %s: %v", kind, meta.Metadata.Name, err)
			}
			return
		}
	}
	t.Fatalf("no %s named *%s rendered (found %v)", kind, suffix, found)
}

// rule is a PolicyRule in one comparable line.
func rule(r rbacv1.PolicyRule) string {
	return fmt.Sprintf("groups=%v resources=%v names=%v verbs=%v nonResource=%v", r.APIGroups, r.Resources, r.ResourceNames, r.Verbs, r.NonResourceURLs)
}

// rules renders a role's rules (see rule) and fails on any wildcard.
func rules(t *testing.T, role rbacv1.ClusterRole) []string {
	t.Helper()
	var got []string
	for _, r := range role.Rules {
		got = append(got, rule(r))
		for _, s := range slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames) {
			if strings.Contains(s, "*") {
				t.Errorf("wildcard in %s", rule(r))
			}
		}
	}
	return got
}

// The plugin's ClusterRole is exactly what the plugin calls (see the rule
// comments in rbac.yaml and the README's Security section): no wildcard, no
// list of claims, no write to other claims' status, no other resources.
func TestChartRBACIsExactlyWhatThePluginUses(t *testing.T) {
	var role rbacv1.ClusterRole
	renderKind(t, "ClusterRole", "-kubelet-plugin", &role, "driverName="+testDriver)
	got := rules(t, role)
	want := []string{
		rule(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}),
		rule(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}),
		rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"list", "watch", "create", "update", "delete"}}),
		rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get"}}),
		rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/status"}, Verbs: []string{"patch"}}),
		rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims/driver"}, ResourceNames: []string{testDriver}, Verbs: []string{"associated-node:patch"}}),
	}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("ClusterRole rules\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}

	var binding rbacv1.ClusterRoleBinding
	renderKind(t, "ClusterRoleBinding", "-kubelet-plugin", &binding)
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != "gpu-dra-driver-kubelet-plugin" || binding.Subjects[0].Namespace != "gpu-dra-driver" {
		t.Errorf("binding subjects %+v, want only the plugin's ServiceAccount", binding.Subjects)
	}
	if binding.RoleRef.Name != role.Name || binding.RoleRef.Kind != "ClusterRole" {
		t.Errorf("binding refers to %+v, want ClusterRole %s", binding.RoleRef, role.Name)
	}
}

// The node-restriction policy: the plugin's ServiceAccount may create,
// update and delete only ResourceSlices whose nodeName is the node of the
// pod its token is bound to, and the binding denies (not just warns).
func TestChartAdmissionPolicyPinsSlicesToTheOwnNode(t *testing.T) {
	var policy admissionv1.ValidatingAdmissionPolicy
	renderKind(t, "ValidatingAdmissionPolicy", "-resourceslices-own-node", &policy)
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", policy.Spec.FailurePolicy)
	}
	rules := policy.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"resourceslices"}) ||
		!slices.Equal(rules[0].Operations, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete}) {
		t.Errorf("match rules %+v, want CREATE, UPDATE and DELETE of resourceslices", rules)
	}
	if len(policy.Spec.MatchConditions) != 1 || !strings.Contains(policy.Spec.MatchConditions[0].Expression, `"system:serviceaccount:gpu-dra-driver:gpu-dra-driver-kubelet-plugin"`) {
		t.Errorf("match conditions %+v, want the plugin's ServiceAccount", policy.Spec.MatchConditions)
	}
	vars := map[string]string{}
	for _, v := range policy.Spec.Variables {
		vars[v.Name] = v.Expression
	}
	if !strings.Contains(vars["userNodeName"], "authentication.kubernetes.io/node-name") {
		t.Errorf("userNodeName %q does not come from the token's node-name claim", vars["userNodeName"])
	}
	if !strings.Contains(vars["objectNodeName"], "oldObject") {
		t.Errorf("objectNodeName %q does not check the old object on DELETE", vars["objectNodeName"])
	}
	var exprs []string
	for _, v := range policy.Spec.Validations {
		exprs = append(exprs, v.Expression)
	}
	if !slices.Contains(exprs, `variables.userNodeName != ""`) || !slices.Contains(exprs, "variables.userNodeName == variables.objectNodeName") {
		t.Errorf("validations %v, want a node for the user and that node on the slice", exprs)
	}

	var binding admissionv1.ValidatingAdmissionPolicyBinding
	renderKind(t, "ValidatingAdmissionPolicyBinding", "-resourceslices-own-node", &binding)
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %+v, want Deny for %s", binding.Spec, policy.Name)
	}
}

// Every grant to the plugin's ServiceAccount: the ClusterRole above, and
// the MPS daemons' Role, namespaced to the release's namespace and only
// pods (templates/mps-admissionpolicy.yaml pins which pods). Nothing else in the
// chart binds the ServiceAccount: no Secrets, no pods elsewhere.
func TestChartPluginServiceAccountBindings(t *testing.T) {
	bound := pluginBindings(helmTemplate(t))
	want := []string{
		"ClusterRoleBinding /gpu-dra-driver-kubelet-plugin -> ClusterRole gpu-dra-driver-kubelet-plugin",
		"RoleBinding gpu-dra-driver/gpu-dra-driver-mps-daemons -> Role gpu-dra-driver-mps-daemons",
	}
	if !slices.Equal(bound, want) {
		t.Errorf("bindings of the plugin's ServiceAccount\n got %s\nwant %s", strings.Join(bound, "\n     "), strings.Join(want, "\n     "))
	}

	var role rbacv1.Role
	renderKind(t, "Role", "-mps-daemons", &role)
	if role.Namespace != "gpu-dra-driver" {
		t.Errorf("MPS daemons' Role in namespace %q, want the release's", role.Namespace)
	}
	got := rules(t, rbacv1.ClusterRole{Rules: role.Rules})
	wantRules := []string{rule(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "create", "delete"}})}
	if !slices.Equal(got, wantRules) {
		t.Errorf("MPS daemons' Role rules\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(wantRules, "\n     "))
	}
}

// Events: RBAC grants create in every namespace (Node events go to the
// default namespace, a claim's to the claim's); the events policy admits
// only the plugin's own kind of event (pkg/driver/events.go recordEvent).
func TestChartEventsPolicyPinsEventsToTheOwnNode(t *testing.T) {
	var policy admissionv1.ValidatingAdmissionPolicy
	renderKind(t, "ValidatingAdmissionPolicy", "-events-own-node", &policy)
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	renderKind(t, "ValidatingAdmissionPolicyBinding", "-events-own-node", &binding)
	if binding.Spec.PolicyName != policy.Name || !slices.Equal(binding.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) {
		t.Errorf("binding %+v, want Deny for %s", binding.Spec, policy.Name)
	}
	event := func(kind, name, ns, host string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: name + ".", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name, Namespace: map[bool]string{true: "", false: ns}[kind == "Node"]},
			Reason:         "GPUUnhealthy", Message: "m", Type: corev1.EventTypeWarning,
			Source: corev1.EventSource{Component: "gpu-kubelet-plugin", Host: host},
		}
	}
	for _, ok := range []*corev1.Event{event("Node", ownNode, "default", ownNode), event("ResourceClaim", "c", "tenant", ownNode), event("Pod", "p", "tenant", ownNode)} {
		if matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: ok}); !matched || len(denials) > 0 {
			t.Errorf("event on %s %s: matched %v, denied %v", ok.InvolvedObject.Kind, ok.InvolvedObject.Name, matched, denials)
		}
	}
	for _, bad := range []struct {
		ev   *corev1.Event
		want string
	}{
		{event("Node", otherNode, "default", ownNode), "reports only on its own Node, not on Node node-b"},
		{event("Node", otherNode, "default", otherNode), "must have source.host node-a, not node-b"},
		{event("Secret", "gpu-dra-driver-webhook-tls", "gpu-dra-driver", ownNode), "not on involvedObject.kind Secret"},
		// Issue 46: an event about its own Node whose related object is
		// another Node, and one filed in another namespace than its object's.
		{func() *corev1.Event {
			e := event("Node", ownNode, "default", ownNode)
			e.Related = &corev1.ObjectReference{Kind: "Node", Name: otherNode}
			return e
		}(), "name no related object, not Node node-b"},
		{func() *corev1.Event {
			e := event("Pod", "p", "tenant", ownNode)
			e.Namespace = "kube-system"
			return e
		}(), "belongs in namespace tenant, not kube-system"},
		{event("Node", ownNode, "kube-system", ownNode), "belongs in namespace default, not kube-system"},
	} {
		matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: bad.ev})
		requireDenied(t, "event on "+bad.ev.InvolvedObject.Kind+" "+bad.ev.InvolvedObject.Name, matched, denials, bad.want)
	}
	matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, object: event("Node", ownNode, "default", ownNode)})
	requireDenied(t, "event from a token without a node", matched, denials, "this token carries no node")
}

// pluginBindings lists, sorted, the (Cluster)RoleBindings of a rendered
// chart that bind the plugin's ServiceAccount, as "Kind ns/name -> RoleKind
// role".
func pluginBindings(out []byte) []string {
	var bound []string
	for _, doc := range strings.Split(string(out), "\n---") {
		var b struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			RoleRef  rbacv1.RoleRef
			Subjects []rbacv1.Subject
		}
		if err := yaml.Unmarshal([]byte(doc), &b); err != nil || (b.Kind != "ClusterRoleBinding" && b.Kind != "RoleBinding") {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == "ServiceAccount" && s.Name == "gpu-dra-driver-kubelet-plugin" {
				bound = append(bound, fmt.Sprintf("%s %s/%s -> %s %s", b.Kind, b.Metadata.Namespace, b.Metadata.Name, b.RoleRef.Kind, b.RoleRef.Name))
			}
		}
	}
	sort.Strings(bound)
	return bound
}
