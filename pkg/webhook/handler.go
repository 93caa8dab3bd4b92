// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// maxRequestBytes bounds an AdmissionReview body. The apiserver limits an
// object to about 3 MiB (etcd's request limit); a review carries the object
// and, on update, the old one.
const maxRequestBytes = 8 << 20

// Handler answers the apiserver's AdmissionReview (admission.k8s.io/v1)
// requests for ResourceClaims and ResourceClaimTemplates.
type Handler struct {
	Validator *Validator
	Logger    klog.Logger
}

// ServeHTTP decodes one AdmissionReview, reviews it and writes the answer.
// A request it cannot read gets an HTTP error, which the apiserver treats
// as a webhook failure (failurePolicy decides), never as a denial.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST an AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("body is not an AdmissionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	resp, err := h.Review(review.Request)
	if err != nil {
		h.Logger.Error(err, "Cannot review", "uid", review.Request.UID, "resource", review.Request.Resource, "namespace", review.Request.Namespace, "name", review.Request.Name)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp.UID = review.Request.UID
	out, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// Review decides one admission request. It errs only when the request is
// not one it can read (a bug in the webhook's configuration).
func (h *Handler) Review(req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow, nil
	}
	if req.Kind.Group != resourceapi.GroupName || req.Kind.Version != "v1" {
		// matchPolicy Equivalent converts every version to the one the
		// rules name (v1), so this means the configuration is wrong.
		return nil, fmt.Errorf("kind %s is not one this webhook reviews; its rules must name resource.k8s.io/v1", req.Kind)
	}
	path, spec, err := specOf(req.Kind.Kind, req.Object.Raw)
	if err != nil {
		return nil, err
	}
	if req.Operation == admissionv1.Update {
		// Updates that leave the spec alone (finalizers, labels) are never
		// denied: a claim admitted while the webhook was down must stay
		// deletable.
		if _, old, err := specOf(req.Kind.Kind, req.OldObject.Raw); err == nil && equality.Semantic.DeepEqual(old, spec) {
			return allow, nil
		}
	}
	errs := h.Validator.ValidateSpec(path, spec)
	if len(errs) == 0 {
		return allow, nil
	}
	msgs := make([]string, len(errs))
	causes := make([]metav1.StatusCause, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
		causes[i] = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: e.Field, Message: e.Message}
	}
	msg := strings.Join(msgs, "; ")
	h.Logger.V(2).Info("Denied", "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name, "operation", req.Operation, "reason", msg)
	return &admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusUnprocessableEntity,
			Reason:  metav1.StatusReasonInvalid,
			Message: msg,
			Details: &metav1.StatusDetails{Name: req.Name, Group: req.Kind.Group, Kind: req.Kind.Kind, Causes: causes},
		},
	}, nil
}

// specOf decodes a claim or template and returns its claim spec with the
// spec's field path in the object.
func specOf(kind string, raw []byte) (string, *resourceapi.ResourceClaimSpec, error) {
	switch kind {
	case "ResourceClaim":
		var c resourceapi.ResourceClaim
		if err := json.Unmarshal(raw, &c); err != nil {
			return "", nil, fmt.Errorf("decode ResourceClaim: %w", err)
		}
		return "spec", &c.Spec, nil
	case "ResourceClaimTemplate":
		var t resourceapi.ResourceClaimTemplate
		if err := json.Unmarshal(raw, &t); err != nil {
			return "", nil, fmt.Errorf("decode ResourceClaimTemplate: %w", err)
		}
		return "spec.spec", &t.Spec.Spec, nil
	default:
		return "", nil, fmt.Errorf("kind %q is not one this webhook reviews; its rules must name resourceclaims and resourceclaimtemplates", kind)
	}
}
