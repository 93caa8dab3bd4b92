// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

func newHandler() *Handler {
	return &Handler{Validator: NewValidator(driver, classes{}), Logger: klog.Background()}
}

// review builds the AdmissionReview the apiserver sends for a template.
func review(t testing.TB, op admissionv1.Operation, s, old *resourceapi.ResourceClaimSpec) []byte {
	t.Helper()
	raw := func(s *resourceapi.ResourceClaimSpec) runtime.RawExtension {
		if s == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(resourceapi.ResourceClaimTemplate{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaimTemplate"},
			ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: "ns"},
			Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: *s},
		})
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("4b1c9d1e-0000-4000-8000-000000000001"),
			Kind:      metav1.GroupVersionKind{Group: "resource.k8s.io", Version: "v1", Kind: "ResourceClaimTemplate"},
			Resource:  metav1.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"},
			Name:      "t",
			Namespace: "ns",
			Operation: op,
			Object:    raw(s),
			OldObject: raw(old),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func serve(t testing.TB, h http.Handler, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("answer is no AdmissionReview: %v: %s", err, rec.Body)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response.UID != "4b1c9d1e-0000-4000-8000-000000000001" {
		t.Fatalf("answer must echo the request's UID as an admission.k8s.io/v1 AdmissionReview: %s", rec.Body)
	}
	return out.Response
}

const badInterval = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"TimeSlicing","timeSlicingConfig":{"interval":"Longest"}}}`

func TestHandlerDeniesTemplateNamingField(t *testing.T) {
	bad := spec([]resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com")}, opaque(driver, badInterval))
	resp := serve(t, newHandler(), review(t, admissionv1.Create, bad, nil))
	if resp.Allowed || resp.Result == nil {
		t.Fatalf("bad config admitted: %+v", resp)
	}
	const want = `spec.spec.devices.config[0].opaque.parameters: GpuConfig: sharing.timeSlicingConfig.interval: unknown interval "Longest"`
	if !strings.HasPrefix(resp.Result.Message, want) || resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Reason != metav1.StatusReasonInvalid {
		t.Errorf("got %d %s %q, want 422 Invalid %q", resp.Result.Code, resp.Result.Reason, resp.Result.Message, want)
	}
	if d := resp.Result.Details; d == nil || len(d.Causes) != 1 || d.Causes[0].Field != "spec.spec.devices.config[0].opaque.parameters" {
		t.Errorf("causes must name the field: %+v", d)
	}
}

func TestHandlerAdmits(t *testing.T) {
	good := spec([]resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com")}, opaque(driver, gpuTS))
	bad := spec([]resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com")}, opaque(driver, badInterval))
	for name, body := range map[string][]byte{
		"valid config": review(t, admissionv1.Create, good, nil),
		// A claim admitted while the webhook was down must stay deletable:
		// the controllers' finalizer updates leave the spec alone.
		"update that keeps a bad spec": review(t, admissionv1.Update, bad, bad),
		"delete":                       review(t, admissionv1.Delete, nil, bad),
	} {
		if resp := serve(t, newHandler(), body); !resp.Allowed {
			t.Errorf("%s: denied: %+v", name, resp.Result)
		}
	}
	if resp := serve(t, newHandler(), review(t, admissionv1.Update, bad, good)); resp.Allowed {
		t.Error("an update that changes the spec to a bad config was admitted")
	}
}

func TestHandlerRejectsWhatIsNoReview(t *testing.T) {
	h := newHandler()
	for name, req := range map[string]*http.Request{
		"GET":       httptest.NewRequest(http.MethodGet, "/validate", nil),
		"not JSON":  httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader("{")),
		"no review": httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(`{"kind":"AdmissionReview"}`)),
	} {
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		// An HTTP error, not a denial: the apiserver applies failurePolicy.
		if rec.Code == http.StatusOK {
			t.Errorf("%s: HTTP 200: %s", name, rec.Body)
		}
	}
}

// BenchmarkHandlerFourConfigs is one review of a template with four
// configs of this driver (two requests, GPU and MIG): decode the review,
// decode and validate every config, write the answer.
func BenchmarkHandlerFourConfigs(b *testing.B) {
	s := spec([]resourceapi.DeviceRequest{exactly("gpu", "gpu.nvidia.com"), exactly("mig", "mig.nvidia.com")},
		opaque(driver, gpuTS, "gpu"), opaque(driver, gpuMPS, "gpu"), opaque(driver, migTS, "mig"),
		opaque(driver, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"MigDeviceConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultPerDevicePinnedMemoryLimit":{"0":"5Gi"}}}}`, "mig"))
	body := review(b, admissionv1.Create, s, nil)
	h := newHandler()
	if resp := serve(b, h, body); !resp.Allowed {
		b.Fatalf("denied: %+v", resp.Result)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/validate", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Body)
		}
	}
}
