// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

import (
	"context"
	"fmt"
	"sort"
	"strings"

	celgo "github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/allocator"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

// The CEL environment of the kube-scheduler whose allocator this binary
// links (internal/allocator: consumable capacity on).
var celCache = allocator.NewCELCache(200)

// selector is one CEL expression with where it comes from.
type selector struct {
	Source     string // "class gpu.nvidia.com" or "request gpu"
	Expression string
	compiled   cel.CompilationResult
}

func compileSelectors(source string, sels []resourceapi.DeviceSelector) []selector {
	var out []selector
	for _, s := range sels {
		if s.CEL == nil {
			continue
		}
		out = append(out, selector{Source: source, Expression: s.CEL.Expression, compiled: celCache.GetOrCompile(s.CEL.Expression)})
	}
	return out
}

// matches evaluates the selector on one device exactly as the allocator
// does, on devs' conversion of it (converted once per snapshot's slice,
// not at each evaluation). An expression that does not compile or fails
// at run time is an error, which the scheduler also reports instead of
// skipping the device.
func (s selector) matches(devs *allocator.Devices, d *device) (bool, error) {
	if s.compiled.Error != nil {
		return false, fmt.Errorf("%s", s.compiled.Error.Detail)
	}
	return devs.Match(context.Background(), s.compiled, d.Driver, d.Dev)
}

// ref is an attribute or capacity an expression reads.
type ref struct {
	Capacity bool
	Name     string // domain/id
}

// references lists the attributes and capacities an expression reads
// (device.attributes['d'].id, device.attributes['d']['id'], and the same
// for capacity), found in its parsed syntax tree.
func references(expression string) []ref {
	env, err := celgo.NewEnv()
	if err != nil {
		return nil
	}
	parsed, iss := env.Parse(expression)
	if iss.Err() != nil {
		return nil
	}
	seen := map[ref]bool{}
	var out []ref
	add := func(r ref, ok bool) {
		if ok && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	for _, e := range celast.MatchDescendants(celast.NavigateAST(parsed.NativeRep()), celast.AllMatcher()) {
		switch e.Kind() {
		case celast.SelectKind:
			sel := e.AsSelect()
			add(domainRef(sel.Operand(), sel.FieldName()))
		case celast.CallKind:
			call := e.AsCall()
			if call.FunctionName() == operators.Index && len(call.Args()) == 2 {
				if id, ok := constString(call.Args()[1]); ok {
					add(domainRef(call.Args()[0], id))
				}
			}
		}
	}
	return out
}

// domainRef matches device.attributes['domain'] (or capacity) followed by id.
func domainRef(e celast.Expr, id string) (ref, bool) {
	if e.Kind() != celast.CallKind || e.AsCall().FunctionName() != operators.Index || len(e.AsCall().Args()) != 2 {
		return ref{}, false
	}
	base, domArg := e.AsCall().Args()[0], e.AsCall().Args()[1]
	domain, ok := constString(domArg)
	if !ok || base.Kind() != celast.SelectKind || base.AsSelect().Operand().Kind() != celast.IdentKind || base.AsSelect().Operand().AsIdent() != "device" {
		return ref{}, false
	}
	switch base.AsSelect().FieldName() {
	case "attributes":
		return ref{Name: domain + "/" + id}, true
	case "capacity":
		return ref{Capacity: true, Name: domain + "/" + id}, true
	}
	return ref{}, false
}

func constString(e celast.Expr) (string, bool) {
	if e.Kind() != celast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().Value().(string)
	return s, ok
}

// value renders what a device has for a reference ("<none>" when absent).
func (d *device) value(r ref) string {
	if r.Capacity {
		name := r.Name
		if domain, id, ok := strings.Cut(name, "/"); ok && domain == d.Driver {
			name = id
		}
		if c, ok := d.Dev.Capacity[resourceapi.QualifiedName(name)]; ok {
			return c.Value.String()
		}
		if c, ok := d.Dev.Capacity[resourceapi.QualifiedName(r.Name)]; ok {
			return c.Value.String()
		}
		return "<none>"
	}
	a, ok := d.attr(r.Name)
	if !ok {
		return "<none>"
	}
	switch {
	case a.StringValue != nil:
		return fmt.Sprintf("%q", *a.StringValue)
	case a.IntValue != nil:
		return fmt.Sprint(*a.IntValue)
	case a.BoolValue != nil:
		return fmt.Sprint(*a.BoolValue)
	case a.VersionValue != nil:
		return *a.VersionValue
	}
	return "<list>"
}

func (r ref) String() string {
	if r.Capacity {
		return "capacity " + r.Name
	}
	return r.Name
}

// valueCounts lists the distinct values devices have for a reference, the
// most common first: what the published devices offer instead.
func valueCounts(devs []*device, r ref, limit int) []string {
	counts := map[string]int{}
	for _, d := range devs {
		counts[d.value(r)]++
	}
	vals := make([]string, 0, len(counts))
	for v := range counts {
		vals = append(vals, v)
	}
	sort.Slice(vals, func(i, j int) bool {
		if counts[vals[i]] != counts[vals[j]] {
			return counts[vals[i]] > counts[vals[j]]
		}
		return vals[i] < vals[j]
	})
	var out []string
	for i, v := range vals {
		if i == limit {
			out = append(out, fmt.Sprintf("... %d more", len(vals)-limit))
			break
		}
		out = append(out, fmt.Sprintf("%s (%d)", v, counts[v]))
	}
	return out
}
