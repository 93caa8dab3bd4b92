// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package step names the steps of preparing a claim (pkg/prepare) and
// marks a prepare failure with the step it failed in, so that tools which
// only see the error text (`gpudra diagnose` reads it from the kubelet's
// FailedPrepareDynamicResources event) can tell the step without matching
// the wording of the message.
//
// The marker is "prepare step <step>: " in front of the error's message,
// e.g. "prepare step mig: device gpu-0-mig-1g10gb-19-3: create 1g.10gb GPU
// instance at slice 3: Insufficient Resources". The kubelet and the driver
// only wrap the plugin's error in more text, so the marker survives into
// the pod event, and Parse finds it there. Step names are lower-case words;
// the marker's format and the names below are stable (a tool may meet a
// plugin older or newer than itself).
//
// This package must stay a leaf (standard library only): pkg/diagnose, which
// the admission webhook links, imports it.
package step

import (
	"errors"
	"fmt"
	"regexp"
)

// Step is one step of preparing a claim.
type Step string

// The steps, in the order prepare runs them (docs/architecture.md, "How
// prepare works").
const (
	// Claim: the claim itself cannot be prepared as allocated (not
	// allocated, no device of this driver, a monitor device without admin
	// access).
	Claim Step = "claim"
	// Fence: this plugin instance was replaced by a newer one (rolling
	// update); the kubelet's retry reaches the new one.
	Fence Step = "fence"
	// Checkpoint: reading or writing the claim's checkpoint record.
	Checkpoint Step = "checkpoint"
	// Restore: a claim prepared before a reboot or GPU reset could not be
	// configured again.
	Restore Step = "restore"
	// Rollback: undoing an earlier, unfinished prepare of the claim failed.
	Rollback Step = "rollback"
	// Config: the claim's opaque config (DeviceClass or claim) is invalid,
	// or asks for sharing the device or node cannot give.
	Config Step = "config"
	// Device: an allocated device is not served by this node.
	Device Step = "device"
	// Reserve: an allocated device conflicts with another device of the
	// claim or with a claim already prepared on the node.
	Reserve Step = "reserve"
	// MIG: configuring the GPU: creating the MIG device, turning MIG mode
	// off for a whole GPU or a VM's, or binding a VM's GPU to vfio-pci.
	MIG Step = "mig"
	// Sharing: setting the time slice or starting the MPS daemon.
	Sharing Step = "sharing"
	// CDI: writing the claim's CDI spec.
	CDI Step = "cdi"
)

// All lists the steps in order.
var All = []Step{Claim, Fence, Checkpoint, Restore, Rollback, Config, Device, Reserve, MIG, Sharing, CDI}

// Prefix starts the marker; the step's name and ": " follow it.
const Prefix = "prepare step "

// Error is a prepare failure and the step it failed in. Its message is the
// marker followed by Err's message.
type Error struct {
	Step Step
	Err  error
}

func (e *Error) Error() string { return Prefix + string(e.Step) + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// Wrap marks err with step s. An error that already carries a step keeps
// it (the innermost, most specific step wins, and a message has at most one
// marker); nil stays nil.
func Wrap(s Step, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := Of(err); ok {
		return err
	}
	return &Error{Step: s, Err: err}
}

// Errorf is Wrap(s, fmt.Errorf(format, args...)).
func Errorf(s Step, format string, args ...any) error {
	return Wrap(s, fmt.Errorf(format, args...))
}

// Of returns the step an error chain carries.
func Of(err error) (Step, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e.Step, true
	}
	return "", false
}

var marker = regexp.MustCompile(regexp.QuoteMeta(Prefix) + `([a-z][a-z0-9-]*): `)

// Parse finds the marker in a message that carries a prepare error,
// however wrapped (a pod event, a log line), and returns the step and what
// follows the marker: the failure without the kubelet's and the driver's
// wrapping. A step this version does not know is returned as it is. ok is
// false when the message has no marker (an error from elsewhere, or from a
// plugin older than the marker).
func Parse(msg string) (s Step, detail string, ok bool) {
	m := marker.FindStringSubmatchIndex(msg)
	if m == nil {
		return "", "", false
	}
	return Step(msg[m[2]:m[3]]), msg[m[1]:], true
}

// Known reports whether s is one of All.
func (s Step) Known() bool {
	for _, k := range All {
		if s == k {
			return true
		}
	}
	return false
}
