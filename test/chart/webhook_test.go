// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"bytes"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// renderAll runs helm template and returns the webhook's objects (named
// *webhook*) by kind; the chart has one of each kind.
func renderAll(t *testing.T, set ...string) map[string][]byte {
	t.Helper()
	out := helmTemplate(t, set...)
	docs := map[string][]byte{}
	for _, doc := range strings.Split(string(out), "\n---") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil || meta.Kind == "" {
			continue
		}
		if strings.Contains(meta.Metadata.Name, "webhook") {
			docs[meta.Kind] = []byte(doc)
		}
	}
	return docs
}

func decode(t *testing.T, docs map[string][]byte, kind string, into any) {
	t.Helper()
	doc, ok := docs[kind]
	if !ok {
		t.Fatalf("no %s rendered", kind)
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Fatalf("%s: %v\n%s", kind, err, doc)
	}
}

func TestChartWebhookDefaults(t *testing.T) {
	docs := renderAll(t)
	var vwc admissionregv1.ValidatingWebhookConfiguration
	decode(t, docs, "ValidatingWebhookConfiguration", &vwc)
	if len(vwc.Webhooks) != 1 {
		t.Fatalf("%d webhooks, want 1", len(vwc.Webhooks))
	}
	w := vwc.Webhooks[0]
	if *w.FailurePolicy != admissionregv1.Ignore || len(w.MatchConditions) == 0 || !strings.Contains(w.MatchConditions[0].Expression, `"gpu.nvidia.com"`) {
		t.Errorf("webhook: failurePolicy %s, matchConditions %v; want Ignore and a condition on this driver's configs", *w.FailurePolicy, w.MatchConditions)
	}
	svc := w.ClientConfig.Service
	if svc == nil || svc.Name != "gpu-dra-driver-webhook" || svc.Namespace != "gpu-dra-driver" || *svc.Path != "/validate" {
		t.Errorf("clientConfig.service: %+v", svc)
	}

	// The serving certificate must verify against the caBundle for the
	// name the apiserver dials: <service>.<namespace>.svc.
	var secret corev1.Secret
	decode(t, docs, "Secret", &secret)
	if !bytes.Equal(secret.Data["ca.crt"], w.ClientConfig.CABundle) {
		t.Error("caBundle is not the Secret's ca.crt")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(w.ClientConfig.CABundle) {
		t.Fatal("caBundle holds no PEM certificate")
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatalf("tls.crt is not PEM: %s", base64.StdEncoding.EncodeToString(secret.Data["tls.crt"]))
	}
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "gpu-dra-driver-webhook.gpu-dra-driver.svc", Roots: roots}); err != nil {
		t.Errorf("serving certificate does not verify for the Service's name: %v", err)
	}

	var d appsv1.Deployment
	decode(t, docs, "Deployment", &d)
	pod := d.Spec.Template.Spec
	if *d.Spec.Replicas < 2 || pod.HostNetwork || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Errorf("Deployment: replicas %d, hostNetwork %v, runAsNonRoot %v", *d.Spec.Replicas, pod.HostNetwork, pod.SecurityContext.RunAsNonRoot)
	}
	c := pod.Containers[0]
	if c.ReadinessProbe == nil || c.LivenessProbe == nil || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("webhook container needs probes, requests and a memory limit: %+v", c)
	}
	// Tools and tests find the kubelet plugin's pods by this label.
	if d.Spec.Template.Labels["app.kubernetes.io/name"] == "gpu-dra-driver" {
		t.Error("webhook pods carry the plugin pods' app.kubernetes.io/name")
	}
	var pdb policyv1.PodDisruptionBudget
	decode(t, docs, "PodDisruptionBudget", &pdb)
	if pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != d.Spec.Template.Labels["app.kubernetes.io/name"] {
		t.Errorf("PodDisruptionBudget selects %v, not the webhook pods", pdb.Spec.Selector.MatchLabels)
	}
}

func TestChartWebhookOptions(t *testing.T) {
	docs := renderAll(t, "webhook.certManager=true", "webhook.failurePolicy=Fail")
	var vwc admissionregv1.ValidatingWebhookConfiguration
	decode(t, docs, "ValidatingWebhookConfiguration", &vwc)
	if *vwc.Webhooks[0].FailurePolicy != admissionregv1.Fail {
		t.Errorf("failurePolicy %s, want Fail", *vwc.Webhooks[0].FailurePolicy)
	}
	if vwc.Annotations["cert-manager.io/inject-ca-from"] != "gpu-dra-driver/gpu-dra-driver-webhook" || len(vwc.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Errorf("with cert-manager the CA is injected: annotations %v, caBundle %d bytes", vwc.Annotations, len(vwc.Webhooks[0].ClientConfig.CABundle))
	}
	if _, ok := docs["Certificate"]; !ok {
		t.Error("no cert-manager Certificate")
	}
	if _, ok := docs["Secret"]; ok {
		t.Error("the chart renders its own Secret although cert-manager issues it")
	}

	docs = renderAll(t, "webhook.enabled=false")
	for _, kind := range []string{"ValidatingWebhookConfiguration", "Deployment", "Secret", "PodDisruptionBudget"} {
		if _, ok := docs[kind]; ok {
			t.Errorf("webhook.enabled=false still renders a %s", kind)
		}
	}
}
