// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"fmt"
	"strings"
	"sync"

	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
)

// requestMatcher returns whether a device may match one of the claim's
// requests (or subrequests) by its class's and its own CEL selectors. The
// allocator evaluates those selectors for every device it looks at, in
// every round; on a dynamic-MIG node most devices match no request, so
// evaluating each once here and handing the allocator the rest is most of
// the speed of a fleet-wide count. A selector that fails on a device keeps
// the device: the allocator then reports the error as the scheduler would.
//
// At 500 nodes that is still 100,000 devices; most are alike in what the
// selectors read (type, profile), so a result is kept per combination of
// the values read, where every use of `device` in the expressions is a
// plain read of the driver, allowMultipleAllocations, or one named
// attribute or capacity (selectorReads).
//
// devs gives the snapshot's devices in the selectors' form, converted once
// per slice, for the selectors evaluated on every device (those whose
// result is not kept); a kept result is worked out once per combination,
// where converting the device alone costs less than its whole slice.
func (s *Snapshot) requestMatcher(claim *resourceapi.ResourceClaim, devs func() *allocator.Devices) (func(driver string, d *resourceapi.Device) bool, error) {
	type alternative struct {
		sels  []selector
		reads []ref
		ok    bool // reads are all the selectors read
		memo  sync.Map
	}
	var alts []*alternative
	add := func(request, class string, sels []resourceapi.DeviceSelector) error {
		dc := s.class(class)
		if dc == nil {
			return fmt.Errorf("request %s: DeviceClass %q does not exist", request, class)
		}
		a := &alternative{sels: append(compileSelectors("class "+class, dc.Spec.Selectors), compileSelectors("request "+request, sels)...), ok: true}
		for _, sel := range a.sels {
			if sel.compiled.Error != nil {
				return fmt.Errorf("%s: selector %q: %s", sel.Source, sel.Expression, sel.compiled.Error.Detail)
			}
			reads, ok := selectorReads(sel.Expression)
			a.reads, a.ok = append(a.reads, reads...), a.ok && ok
		}
		alts = append(alts, a)
		return nil
	}
	for _, r := range claim.Spec.Devices.Requests {
		if r.Exactly != nil {
			if err := add(r.Name, r.Exactly.DeviceClassName, r.Exactly.Selectors); err != nil {
				return nil, err
			}
		}
		for _, sub := range r.FirstAvailable {
			if err := add(r.Name+"/"+sub.Name, sub.DeviceClassName, sub.Selectors); err != nil {
				return nil, err
			}
		}
	}
	eval := func(a *alternative, dev *device, devs *allocator.Devices) bool {
		for _, sel := range a.sels {
			m, err := sel.matches(devs, dev)
			if err != nil {
				return true
			}
			if !m {
				return false
			}
		}
		return true
	}
	return func(driver string, d *resourceapi.Device) bool {
		dev := &device{Driver: driver, Dev: d}
		for _, a := range alts {
			key, cacheable := "", a.ok
			if cacheable {
				var b strings.Builder
				fmt.Fprintf(&b, "%s|%v", driver, d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations)
				for _, r := range a.reads {
					v := dev.value(r)
					cacheable = cacheable && v != "<list>"
					b.WriteString("|" + v)
				}
				key = b.String()
			}
			var m bool
			if !cacheable {
				m = eval(a, dev, devs())
			} else if v, ok := a.memo.Load(key); ok {
				m = v.(bool)
			} else {
				m = eval(a, dev, nil)
				a.memo.Store(key, m)
			}
			if m {
				return true
			}
		}
		return false
	}, nil
}

// selectorReads lists the attributes and capacities an expression reads
// and reports whether that is all it reads of the device: every `device`
// in it is device.driver, device.allowMultipleAllocations, or
// device.attributes['domain'].id / ['domain']['id'] (capacity alike).
func selectorReads(expression string) ([]ref, bool) {
	env, err := celgo.NewEnv()
	if err != nil {
		return nil, false
	}
	parsed, iss := env.Parse(expression)
	if iss.Err() != nil {
		return nil, false
	}
	uses, plain := 0, 0
	var reads []ref
	for _, e := range celast.MatchDescendants(celast.NavigateAST(parsed.NativeRep()), celast.AllMatcher()) {
		switch e.Kind() {
		case celast.IdentKind:
			if e.AsIdent() == "device" {
				uses++
			}
		case celast.SelectKind:
			sel := e.AsSelect()
			if op := sel.Operand(); op.Kind() == celast.IdentKind && op.AsIdent() == "device" && (sel.FieldName() == "driver" || sel.FieldName() == "allowMultipleAllocations") {
				plain++
			} else if r, ok := domainRef(sel.Operand(), sel.FieldName()); ok {
				reads, plain = append(reads, r), plain+1
			}
		case celast.CallKind:
			call := e.AsCall()
			if call.FunctionName() == operators.Index && len(call.Args()) == 2 {
				if id, ok := constString(call.Args()[1]); ok {
					if r, ok := domainRef(call.Args()[0], id); ok {
						reads, plain = append(reads, r), plain+1
					}
				}
			}
		}
	}
	return reads, uses == plain
}
