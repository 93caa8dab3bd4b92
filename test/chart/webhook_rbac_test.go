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

// The webhook's ClusterRole is exactly what it uses: DeviceClasses for
// admission, and with webhook.explainPending (the default) the pending
// explainer's informers and its Events. Its Lease is a Role's, in the
// release namespace, and only create may name no Lease.
func TestChartWebhookRBAC(t *testing.T) {
	classes := rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"deviceclasses"}, Verbs: []string{"get", "list", "watch"}})
	for _, tc := range []struct {
		set     []string
		explain bool
		want    []string
	}{
		{explain: true, want: []string{
			classes,
			rule(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "nodes"}, Verbs: []string{"list", "watch"}}),
			rule(rbacv1.PolicyRule{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceslices"}, Verbs: []string{"list", "watch"}}),
			rule(rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}),
		}},
		{set: []string{"webhook.explainPending=false"}, want: []string{classes}},
	} {
		var role rbacv1.ClusterRole
		renderKind(t, "ClusterRole", "-webhook", &role, tc.set...)
		got := rules(t, role)
		sort.Strings(got)
		sort.Strings(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v: ClusterRole rules\n got %s\nwant %s", tc.set, strings.Join(got, "\n     "), strings.Join(tc.want, "\n     "))
		}

		docs := renderAll(t, tc.set...)
		var d appsv1.Deployment
		decode(t, docs, "Deployment", &d)
		c := d.Spec.Template.Spec.Containers[0]
		if v, _ := flag(&c, "--explain-pending"); v != map[bool]string{true: "true", false: "false"}[tc.explain] {
			t.Errorf("%v: --explain-pending=%q, want %v", tc.set, v, tc.explain)
		}
		_, hasRole := docs["Role"]
		_, hasBinding := docs["RoleBinding"]
		if !tc.explain {
			if hasRole || hasBinding || envFrom(&c, "POD_NAME") != "" {
				t.Errorf("%v: explainer off, but a Role (%v), RoleBinding (%v) or POD_NAME: %v", tc.set, hasRole, hasBinding, c.Env)
			}
			continue
		}
		if lease, _ := flag(&c, "--leader-election-lease-name"); lease != explainerLease {
			t.Errorf("--leader-election-lease-name=%q, want %s", lease, explainerLease)
		}
		if envFrom(&c, "POD_NAME") != "metadata.name" || envFrom(&c, "POD_NAMESPACE") != "metadata.namespace" {
			t.Errorf("POD_NAME and POD_NAMESPACE must come from the downward API: %v", c.Env)
		}
		var lr rbacv1.Role
		decode(t, docs, "Role", &lr)
		got = nil
		for _, r := range lr.Rules {
			got = append(got, rule(r))
		}
		want := []string{
			rule(rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}}),
			rule(rbacv1.PolicyRule{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{explainerLease}, Verbs: []string{"get", "update"}}),
		}
		if lr.Namespace != "gpu-dra-driver" || !slices.Equal(got, want) {
			t.Errorf("Role in %q\n got %s\nwant %s", lr.Namespace, strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
		var rb rbacv1.RoleBinding
		decode(t, docs, "RoleBinding", &rb)
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != lr.Name || len(rb.Subjects) != 1 ||
			rb.Subjects[0].Name != "gpu-dra-driver-webhook" || rb.Subjects[0].Namespace != "gpu-dra-driver" {
			t.Errorf("RoleBinding %+v, want the webhook's ServiceAccount bound to %s", rb, lr.Name)
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
