// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package pendingexplainer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

const (
	// Reason is the Event's reason.
	Reason = "DeviceTaintsBlockScheduling"
	// Action is the Event's action: what the taints fail.
	Action = "Scheduling"
	// maxNote is the API's limit on an events.k8s.io note.
	maxNote = 1024
	// maxDevices bounds the devices named per request: a node of eight
	// tainted GPUs should not push the advice out of the note.
	maxDevices = 4
)

var everything = labels.Everything()

// sync explains one pod: an Event when device taints alone keep it
// Pending, unless the same one was posted less than MinRepeat ago.
func (e *Explainer) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this explainer made: nothing to retry
	}
	pod, err := e.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		e.forget(key)
		return nil
	}
	if err != nil {
		return err
	}
	if !unschedulable(pod) {
		e.forget(key)
		return nil
	}
	all, err := e.slices.List(everything)
	if err != nil {
		return err
	}
	sc := taintScope(e.cfg.DriverName, all)
	if sc.empty() {
		// No tainted device of this driver: nothing to explain, and no
		// diagnosis to pay for.
		e.forget(key)
		e.dropListed()
		return nil
	}
	snap, err := e.snapshot(ctx, pod, all, sc)
	if err != nil {
		return err
	}
	report, blocks := clusterview.TaintBlocked(snap, ns, name)
	if len(blocks) == 0 {
		e.logger.V(5).Info("Not blocked by device taints alone", "pod", key, "verdict", report.Verdict)
		// A later taint is news again.
		e.forget(key)
		return nil
	}
	msg := Message(blocks)
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	last, seen := e.posted[key]
	if seen && last.message == msg && now.Sub(last.at) < e.cfg.MinRepeat {
		e.mu.Unlock()
		return nil
	}
	e.posted[key] = posted{message: msg, at: now}
	e.mu.Unlock()
	e.logger.V(2).Info("Device taints block scheduling", "pod", key, "message", msg)
	e.cfg.Recorder.Eventf(pod, relatedSlice(snap, blocks), corev1.EventTypeWarning, Reason, Action, "%s", msg)
	return nil
}

// snapshot is what clusterview.TaintBlocked reads, from the caches, within
// the taint scope (scope.go): the pod alone, all claims (their allocations
// decide which devices are free), classes, and the slices and nodes in
// scope, the slices that the cache has only as stubs listed from the API
// server (live.go). It holds copies of the structs, whose slices and maps
// clusterview only reads. The plugin pods and metrics a diagnosis after
// scheduling needs are left out: the verdict of a Pending pod does not
// read them.
func (e *Explainer) snapshot(ctx context.Context, pod *corev1.Pod, all []*resourceapi.ResourceSlice, sc scope) (*clusterview.Snapshot, error) {
	s := &clusterview.Snapshot{DriverName: e.cfg.DriverName, Pods: []corev1.Pod{*pod}}
	var err error
	if s.Claims, err = values(e.claims.List(everything)); err != nil {
		return nil, err
	}
	if s.DeviceClasses, err = values(e.classes.List(everything)); err != nil {
		return nil, err
	}
	nodes, err := e.nodes.List(everything)
	if err != nil {
		return nil, err
	}
	if s.Slices, err = e.slicesInScope(ctx, all, sc); err != nil {
		return nil, err
	}
	s.Nodes = inScope(nodes, sc.holdsNode)
	return s, nil
}

// values copies a lister's objects into the snapshot's value slices.
func values[T any](list []*T, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	return inScope(list, func(*T) bool { return true }), nil
}

// Message is the Event's note: each blocked request with its tainted
// devices (node/device) and their taints (key=value:Effect), then what to
// do. It stays within the API's 1024 bytes.
func Message(blocks []clusterview.TaintBlock) string {
	var parts []string
	extended := false
	for _, b := range blocks {
		what := fmt.Sprintf("claim %s, request %s", b.Claim, b.Request)
		if b.Claim == "" {
			what = fmt.Sprintf("the claim for the pod's %s, request %s", b.PodClaim, b.Request)
			extended = true
		}
		var devs []string
		for i, d := range b.Devices {
			if i == maxDevices {
				devs = append(devs, fmt.Sprintf("and %d more", len(b.Devices)-i))
				break
			}
			where := d.Node
			if where == "" {
				where = d.Pool
			}
			devs = append(devs, fmt.Sprintf("%s/%s (%s)", where, d.Device, strings.Join(d.Taints, ", ")))
		}
		parts = append(parts, fmt.Sprintf("%s: the devices it could get are tainted: %s", what, strings.Join(devs, ", ")))
	}
	fix := "Wait for the GPU to recover, or tolerate the taint in the request (tolerations in spec.devices.requests[].exactly)"
	if extended {
		fix = "Wait for the GPU to recover, or ask for the GPU with a ResourceClaim whose request tolerates the taint"
	}
	msg := "Device taints keep this pod from being scheduled: " + strings.Join(parts, "; ") + ". " + fix + "."
	return truncate(msg, maxNote)
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// relatedSlice is the ResourceSlice that carries the first tainted device:
// the Event's related object. Its resourceVersion is part of the
// recorder's series key, so a taint that changes (another reason, another
// device of the slice) starts a new Event instead of counting as a repeat
// of the old note.
func relatedSlice(s *clusterview.Snapshot, blocks []clusterview.TaintBlock) runtime.Object {
	d := blocks[0].Devices[0]
	for i := range s.Slices {
		sl := &s.Slices[i]
		if sl.Spec.Driver == d.Driver && sl.Spec.Pool.Name == d.Pool &&
			slices.ContainsFunc(sl.Spec.Devices, func(x resourceapi.Device) bool { return x.Name == d.Device }) {
			return sl
		}
	}
	return nil
}
