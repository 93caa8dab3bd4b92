// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

const explainerLease = "gpu-dra-driver-webhook-pending-explainer"

// The webhook's ClusterRole is exactly what admission uses: DeviceClasses
// (issue 46: the pod the API server reaches over the network reads no pod
// specs). The pending explainer (webhook.explainPending, the default) runs
// in a Deployment of its own under a ServiceAccount of its own, with its
// informers, its Events and its Lease; only create may name no Lease.
func TestChartWebhookRBAC(t *testing.T) {
	classes := rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"deviceclasses"}, Verbs: []string{"get", "list", "watch"}})
	for _, tc := range []struct {
		set     []string
		explain bool
	}{
		{explain: true},
		{set: []string{"webhook.explainPending=false"}},
	} {
		var role rbacv1.ClusterRole
		renderKind(t, "ClusterRole", "-webhook", &role, tc.set...)
		if got := rules(t, role); !slices.Equal(got, []string{classes}) {
			t.Errorf("%v: the webhook's ClusterRole\n got %s\nwant %s", tc.set, strings.Join(got, "\n     "), classes)
		}
		docs := renderAll(t, tc.set...)
		var d appsv1.Deployment
		renderKind(t, "Deployment", "-webhook", &d, tc.set...)
		c := d.Spec.Template.Spec.Containers[0]
		if v, _ := flag(&c, "--explain-pending"); v != "false" {
			t.Errorf("%v: the webhook runs with --explain-pending=%q, want false: the explainer has a pod of its own", tc.set, v)
		}
		if envFrom(&c, "POD_NAME") != "" {
			t.Errorf("%v: the webhook still gets POD_NAME for a Lease: %v", tc.set, c.Env)
		}
		_, hasRole := docs["Role"]
		_, hasBinding := docs["RoleBinding"]
		if !tc.explain {
			if hasRole || hasBinding || strings.Contains(string(helmTemplate(t, tc.set...)), "name: "+explainerLease) {
				t.Errorf("%v: explainer off, but it still renders a Role (%v), RoleBinding (%v) or its Deployment", tc.set, hasRole, hasBinding)
			}
			continue
		}
		var er rbacv1.ClusterRole
		renderKind(t, "ClusterRole", "-pending-explainer", &er, tc.set...)
		got := rules(t, er)
		want := []string{
			rule(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"list", "watch"}}),
			rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceslices"}, Verbs: []string{"list", "watch"}}),
			rule(rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}),
			classes,
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("the explainer's ClusterRole\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
		var ed appsv1.Deployment
		renderKind(t, "Deployment", "-pending-explainer", &ed, tc.set...)
		ec := ed.Spec.Template.Spec.Containers[0]
		if ed.Spec.Template.Spec.ServiceAccountName != explainerLease || len(ec.Args) == 0 || ec.Args[0] != "pending-explainer" || len(ec.Ports) != 0 {
			t.Errorf("the explainer's Deployment: ServiceAccount %q, args %v, ports %v; want its own ServiceAccount %s, the pending-explainer command, no ports",
				ed.Spec.Template.Spec.ServiceAccountName, ec.Args, ec.Ports, explainerLease)
		}
		if lease, _ := flag(&ec, "--leader-election-lease-name"); lease != explainerLease {
			t.Errorf("--leader-election-lease-name=%q, want %s", lease, explainerLease)
		}
		if envFrom(&ec, "POD_NAME") != "metadata.name" || envFrom(&ec, "POD_NAMESPACE") != "metadata.namespace" {
			t.Errorf("POD_NAME and POD_NAMESPACE must come from the downward API: %v", ec.Env)
		}
		var lr rbacv1.Role
		decode(t, docs, "Role", &lr)
		got = nil
		for _, r := range lr.Rules {
			got = append(got, rule(r))
		}
		want = []string{
			rule(rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}}),
			rule(rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{explainerLease}, Verbs: []string{"get", "update"}}),
		}
		if lr.Namespace != "gpu-dra-driver" || !slices.Equal(got, want) {
			t.Errorf("Role in %q\n got %s\nwant %s", lr.Namespace, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
		var rb rbacv1.RoleBinding
		decode(t, docs, "RoleBinding", &rb)
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != lr.Name || len(rb.Subjects) != 1 ||
			rb.Subjects[0].Name != explainerLease || rb.Subjects[0].Namespace != "gpu-dra-driver" {
			t.Errorf("RoleBinding %+v, want the explainer's ServiceAccount bound to %s", rb, lr.Name)
		}
	}
}

// envFrom returns the field path a variable reads from the downward API.
func envFrom(c *corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}
