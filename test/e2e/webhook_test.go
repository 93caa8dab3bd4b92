// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The chart's names for release gpu-dra-driver (hack/cluster/deploy.sh).
const (
	webhookName = "gpu-dra-driver-webhook" // Deployment, Service and ValidatingWebhookConfiguration
	webhookPods = "app.kubernetes.io/name=gpu-dra-driver-webhook"
)

// TestWebhook checks admission of claims and templates against the
// webhook the chart installs by default, then with the webhook down.
func TestWebhook(t *testing.T) {
	kubectl(t, "apply", "-f", repoRoot+"/demo/specs/00-namespace.yaml")
	waitWebhookServing(t)
	for _, step := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"DeniesBadConfigsNamingTheField", testWebhookDenies},
		{"AdmitsValidClaimAndTemplate", testWebhookAdmits},
		{"WhileDown", testWebhookDown},
	} {
		if !t.Run(step.name, step.fn) {
			t.FailNow()
		}
	}
}

const configHeader = `apiVersion: resource.nvidia.com/v1beta1, kind: GpuConfig`

// claimYAML is a ResourceClaim (template false) or ResourceClaimTemplate
// for one device of class, with one opaque config of drv.
func claimYAML(name string, template bool, class, drv, params string) string {
	spec := fmt.Sprintf(`
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: %s}
    config:
    - opaque:
        driver: %s
        parameters: {%s}`, class, drv, params)
	if !template {
		return fmt.Sprintf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: %s, namespace: %s}\nspec:%s\n", name, ns, spec)
	}
	return fmt.Sprintf("apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: %s, namespace: %s}\nspec:\n  spec:%s\n", name, ns, strings.ReplaceAll(spec, "\n", "\n  "))
}

// kubectlApply runs kubectl apply on a manifest and returns what it said.
func kubectlApply(manifest string) (string, error) {
	cmd := exec.Command("kubectl", "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func exists(t *testing.T, template bool, name string) bool {
	t.Helper()
	var err error
	if template {
		_, err = client.ResourceV1().ResourceClaimTemplates(ns).Get(context.Background(), name, metav1.GetOptions{})
	} else {
		_, err = client.ResourceV1().ResourceClaims(ns).Get(context.Background(), name, metav1.GetOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func testWebhookDenies(t *testing.T) {
	for _, tc := range []struct {
		name, class, params, want string
	}{
		{"unknown-field", "gpu.nvidia.com", configHeader + `, sharing: {strategy: TimeSlicing, timeSlicingConfg: {interval: Long}}`,
			`GpuConfig: unknown field "sharing.timeSlicingConfg"`},
		{"bad-interval", "gpu.nvidia.com", configHeader + `, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Forever}}`,
			`GpuConfig: sharing.timeSlicingConfig.interval: unknown interval "Forever"; use Default, Short, Medium or Long`},
		{"thread-percentage", "gpu.nvidia.com", configHeader + `, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 150}}`,
			`GpuConfig: sharing.mpsConfig.defaultActiveThreadPercentage: 150 is outside 1-100`},
		{"gpu-config-on-mig", "mig.nvidia.com", configHeader + `, sharing: {strategy: TimeSlicing}`,
			`for request "gpu" (deviceClassName mig.nvidia.com): kind GpuConfig cannot configure a mig device: use kind MigDeviceConfig for MIG devices`},
	} {
		for _, template := range []bool{false, true} {
			name := "webhook-" + tc.name
			// The webhook answers 422 Invalid with the field as the cause,
			// so kubectl shows it as it shows the apiserver's own checks.
			want := fmt.Sprintf(`The ResourceClaim %q is invalid: spec.devices.config[0].opaque.parameters: %s`, name, tc.want)
			if template {
				want = fmt.Sprintf(`The ResourceClaimTemplate %q is invalid: spec.spec.devices.config[0].opaque.parameters: %s`, name, tc.want)
			}
			out, err := kubectlApply(claimYAML(name, template, tc.class, driverName, tc.params))
			if err == nil || !strings.Contains(out, want) {
				t.Errorf("kubectl apply of %s (template %v): err %v, output:\n%s\nwant it to contain %q", name, template, err, out, want)
			}
			if exists(t, template, name) {
				t.Errorf("%s (template %v) was created although denied", name, template)
			}
			if template {
				t.Logf("kubectl apply says: %s", strings.TrimSpace(out))
			}
		}
	}
}

func testWebhookAdmits(t *testing.T) {
	params := configHeader + `, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}`
	for _, template := range []bool{false, true} {
		if out, err := kubectlApply(claimYAML("webhook-valid", template, "gpu.nvidia.com", driverName, params)); err != nil {
			t.Errorf("valid config (template %v) refused: %v\n%s", template, err, out)
		}
		if !exists(t, template, "webhook-valid") {
			t.Errorf("valid config (template %v) not created", template)
		}
	}
	kubectl(t, "delete", "-n", ns, "resourceclaim/webhook-valid", "resourceclaimtemplate/webhook-valid", "--wait=true")
}

func testWebhookDown(t *testing.T) {
	restore := stopWebhook(t)
	defer restore()
	// failurePolicy Fail for a moment: a claim for another driver must
	// still be admitted (matchConditions keep it from the webhook), and a
	// claim of this driver must be refused (proof that the webhook is down
	// and Fail in effect).
	setFailurePolicy(t, "Fail")
	func() {
		defer setFailurePolicy(t, "Ignore")
		waitFor(t, "the apiserver to fail calls to the stopped webhook", 30*time.Second, func() (bool, string) {
			err := dryRunClaim(driverName, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig"}`)
			return err != nil && strings.Contains(err.Error(), "failed calling webhook"), fmt.Sprint(err)
		})
		out, err := kubectlApply(claimYAML("webhook-other-driver", false, "gpu.nvidia.com", "other.example.com", `anything: [goes, here]`))
		if err != nil || !exists(t, false, "webhook-other-driver") {
			t.Errorf("claim for another driver refused while the webhook is down: %v\n%s", err, out)
		}
		kubectl(t, "delete", "-n", ns, "resourceclaim/webhook-other-driver", "--wait=true")
	}()

	// failurePolicy Ignore: a bad template is admitted, and the plugin
	// names the field when it prepares the pod.
	waitFor(t, "the apiserver to ignore the stopped webhook", 30*time.Second, func() (bool, string) {
		err := dryRunClaim(driverName, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","bad":1}`)
		return err == nil, fmt.Sprint(err)
	})
	bad := claimYAML("webhook-prepare", true, "gpu.nvidia.com", driverName, configHeader+`, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 150}}`)
	applyYAML(t, bad+`---
apiVersion: v1
kind: Pod
metadata: {name: webhook-prepare, namespace: gpu-demo}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: webhook-prepare}]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [{name: gpu}]}}]
`)
	waitFor(t, "the plugin to name the bad field at prepare", 60*time.Second, func() (bool, string) {
		ev := events(t, "Pod", "webhook-prepare")
		return strings.Contains(ev, "sharing.mpsConfig.defaultActiveThreadPercentage: 150 is outside 1-100"), ev
	})
	deletePods(t, "webhook-prepare")
	kubectl(t, "delete", "-n", ns, "resourceclaimtemplate/webhook-prepare", "--wait=true")
}

// dryRunClaim sends a server-side dry-run create of a claim with one config
// of drv: admission webhooks run, nothing is stored.
// The dry run goes to "default", which every cluster has: tests that stop
// the webhook may run before the demo namespace exists.
func dryRunClaim(drv, params string) error {
	obj := claimObject(drv, params)
	obj.Namespace = metav1.NamespaceDefault
	_, err := client.ResourceV1().ResourceClaims(obj.Namespace).Create(context.Background(), obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// claimObject is a claim for one GPU with one opaque config of drv.
func claimObject(drv, params string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-dry-run-", Namespace: ns},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com"}}},
			Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
				Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: drv, Parameters: runtime.RawExtension{Raw: []byte(params)}},
			}}},
		}},
	}
}

// waitWebhookServing waits until the apiserver gets the webhook's denial
// of a bad config: the pod is ready, its endpoint known, the config loaded.
func waitWebhookServing(t *testing.T) {
	t.Helper()
	waitFor(t, "the webhook to deny a bad config", 90*time.Second, func() (bool, string) {
		err := dryRunClaim(driverName, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","bad":1}`)
		return err != nil && strings.Contains(err.Error(), "denied the request"), fmt.Sprint(err)
	})
}

// stopWebhook scales the webhook to no pods and waits until its Service
// has no endpoint; the returned func scales it back and waits until it
// serves again.
func stopWebhook(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	d, err := client.AppsV1().Deployments(driverNS).Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas := *d.Spec.Replicas
	kubectl(t, "scale", "deployment", "-n", driverNS, webhookName, "--replicas=0")
	waitFor(t, "webhook pods and endpoints gone", 60*time.Second, func() (bool, string) {
		pods, err := client.CoreV1().Pods(driverNS).List(ctx, metav1.ListOptions{LabelSelector: webhookPods})
		if err != nil || len(pods.Items) > 0 {
			return false, fmt.Sprintf("pods left: %v", err)
		}
		n := readyEndpoints(t)
		return n == 0, fmt.Sprintf("%d ready endpoints", n)
	})
	return func() {
		t.Helper()
		kubectl(t, "scale", "deployment", "-n", driverNS, webhookName, fmt.Sprintf("--replicas=%d", replicas))
		waitWebhookServing(t)
	}
}

func readyEndpoints(t *testing.T) int {
	t.Helper()
	slices, err := client.DiscoveryV1().EndpointSlices(driverNS).List(context.Background(), metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=" + webhookName})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

func setFailurePolicy(t *testing.T, policy string) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": %q}]`, policy)
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Patch(context.Background(), webhookName, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("set failurePolicy %s: %v", policy, err)
	}
}
