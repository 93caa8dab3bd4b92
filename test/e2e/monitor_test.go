// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const monitorClass = "monitor." + driverName

// monitorClaimYAML is a ResourceClaimTemplate (or, with a config of this
// driver, a ResourceClaim) asking for every monitor device; admin sets
// adminAccess: true.
func monitorClaimYAML(kind, name, namespace string, admin, withConfig bool) string {
	spec := fmt.Sprintf(`devices:
  requests:
  - name: all
    exactly: {deviceClassName: %s, allocationMode: All%s}
`, monitorClass, map[bool]string{true: ", adminAccess: true"}[admin])
	if withConfig {
		spec += `  config:
  - opaque:
      driver: ` + driverName + `
      parameters: {apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig}
`
	}
	indent := "  "
	if kind == "ResourceClaimTemplate" {
		spec = "spec:\n" + indentLines(spec, "  ")
	}
	return fmt.Sprintf("apiVersion: resource.k8s.io/v1\nkind: %s\nmetadata: {name: %s, namespace: %s}\nspec:\n%s", kind, name, namespace, indentLines(spec, indent))
}

func indentLines(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = by + l
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestAdminMonitorOnBusyMIGNode (issue 21): with dynamic MIG, a GPU held
// whole and a GPU running a MIG device do not keep a monitoring pod with
// admin access to every GPU from starting: it gets the monitor devices,
// which consume no counters, sees all eight GPUs, and leaves the workloads
// and their MIG device alone. Asking for monitor devices without admin
// access is refused when the claim is written.
func TestAdminMonitorOnBusyMIGNode(t *testing.T) {
	requireCleanNode(t)
	t.Cleanup(func() { waitNodeClean(t, "after TestAdminMonitorOnBusyMIGNode", nil) })
	const work, admin = "monitor-workloads", "monitor-admin"
	testNamespace(t, work)
	testNamespace(t, admin)
	kubectl(t, "label", "namespace", admin, "resource.kubernetes.io/admin-access=true")

	applyYAML(t, gpuTemplate("whole", work, "!device.allowMultipleAllocations"))
	applyYAML(t, classTemplate("small", work, "mig.nvidia.com", "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"))
	applyYAML(t, claimPod("whole", work, "whole", "", map[string]string{"ctr": ""}))
	applyYAML(t, claimPod("small", work, "small", "", map[string]string{"ctr": ""}))
	waitRunningIn(t, work, "whole", "small")
	_, wholeUUID, _ := gpuOfIn(t, work, "whole", "ctr")
	_, migParent, migs := gpuOfIn(t, work, "small", "ctr")
	if len(migs) != 1 || wholeUUID == migParent {
		t.Fatalf("setup: whole GPU %s, MIG pod on %s with %v", wholeUUID, migParent, migs)
	}
	migsBefore := migInstances(t)

	// Without admin access: refused at admission, claim and template, with
	// or without a config of this driver (which routes it to the webhook
	// too).
	for _, tc := range []struct {
		kind, name string
		withConfig bool
	}{
		{"ResourceClaim", "no-admin", false},
		{"ResourceClaim", "no-admin-config", true},
		{"ResourceClaimTemplate", "no-admin", false},
	} {
		out, err := kubectlApply(monitorClaimYAML(tc.kind, tc.name, admin, false, tc.withConfig))
		if err == nil || !strings.Contains(out, "adminAccess: true") || !strings.Contains(out, monitorClass) {
			t.Errorf("%s %s without adminAccess: err %v, output %q; want a refusal naming adminAccess and %s", tc.kind, tc.name, err, out, monitorClass)
		}
		t.Logf("%s %s without adminAccess refused: %s", tc.kind, tc.name, strings.TrimSpace(out))
	}

	webhookRefusesMonitor(t, admin)

	applyYAML(t, monitorClaimYAML("ResourceClaimTemplate", "monitors", admin, true, false))
	applyYAML(t, claimPod("monitor", admin, "monitors", "", map[string]string{"ctr": ""}))
	waitRunningIn(t, admin, "monitor")
	gpuOfIn(t, admin, "monitor", "ctr") // waits for the output
	out, err := exec.Command("kubectl", "logs", "-n", admin, "monitor", "-c", "ctr").CombinedOutput()
	if err != nil {
		t.Fatalf("logs: %v\n%s", err, out)
	}
	t.Logf("nvidia-smi -L in the monitor pod:\n%s", out)
	var uuids []string
	for _, m := range gpuLine.FindAllStringSubmatch(string(out), -1) {
		if !slices.Contains(uuids, m[2]) {
			uuids = append(uuids, m[2])
		}
	}
	if len(uuids) != 8 || !slices.Contains(uuids, wholeUUID) || !slices.Contains(uuids, migParent) {
		t.Errorf("monitor pod sees GPUs %v, want all 8 including %s (whole) and %s (MIG)", uuids, wholeUUID, migParent)
	}
	claim := claimOf(t, admin, "monitor", "gpu")
	rc, err := client.ResourceV1().ResourceClaims(admin).Get(context.Background(), claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rc.Status.Allocation.Devices.Results {
		if !strings.HasSuffix(r.Device, "-monitor") || r.AdminAccess == nil || !*r.AdminAccess {
			t.Errorf("monitor claim allocated %s (admin access %v)", r.Device, r.AdminAccess)
		}
	}

	// The monitor changed nothing: the workloads run, the MIG device is
	// there, and it stays there when the monitor goes.
	kubectl(t, "delete", "pod", "-n", admin, "monitor", "--wait=true")
	for _, p := range []string{"whole", "small"} {
		if ph := podIn(t, work, p).Status.Phase; ph != corev1.PodRunning {
			t.Errorf("workload %s is %s after the monitor", p, ph)
		}
	}
	if got := migInstances(t); got != migsBefore {
		t.Errorf("%d MIG instances after the monitor, %d before", got, migsBefore)
	}
}

// webhookRefusesMonitor shows that the webhook refuses a monitor request
// without admin access by itself: the admission policy, which answers
// first, is unbound for a moment (and bound again at once), and a claim
// that carries a config of this driver (what routes a claim to the
// webhook) must be refused by the webhook, naming the field.
func webhookRefusesMonitor(t *testing.T, namespace string) {
	t.Helper()
	ctx := context.Background()
	bindings := client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings()
	const name = "gpu-dra-driver-monitor-admin-access"
	saved, err := bindings.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's monitor admission policy binding: %v", err)
	}
	restore := func() {
		if _, err := bindings.Get(ctx, name, metav1.GetOptions{}); err == nil {
			return
		}
		b := saved.DeepCopy()
		b.ResourceVersion, b.UID, b.CreationTimestamp, b.ManagedFields = "", "", metav1.Time{}, nil
		if _, err := bindings.Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Errorf("restoring the admission policy binding %s: %v", name, err)
		}
	}
	t.Cleanup(restore)
	if err := bindings.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	const want = `spec.devices.requests[0].exactly.adminAccess: request "all" asks for a GPU monitor device (deviceClassName ` + monitorClass + `), which is only for admin access: set adminAccess: true`
	waitFor(t, "the webhook to refuse a monitor claim without admin access", 30*time.Second, func() (bool, string) {
		out, err := kubectlApply(monitorClaimYAML("ResourceClaim", "webhook-no-admin", namespace, false, true))
		if err == nil {
			_ = exec.Command("kubectl", "delete", "-n", namespace, "resourceclaim/webhook-no-admin", "--wait=true").Run()
			t.Fatalf("monitor claim without admin access admitted with the policy unbound: %s", out)
		}
		return strings.Contains(out, want), out
	})
	restore()
	t.Logf("webhook refusal (policy unbound): %s", want)
}
