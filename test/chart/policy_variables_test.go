// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"regexp"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// celReserved are the words of the CEL language definition that cannot name
// an identifier: its literals, "in", and the words it reserves for later.
var celReserved = map[string]bool{}

func init() {
	for _, w := range strings.Fields("true false null in as break const continue else for function if import let loop package namespace return var void while") {
		celReserved[w] = true
	}
}

var celIdent = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// Every variable of every admission policy the chart renders is named by a
// CEL identifier, which the API server requires of a variable's name (it
// refuses the policy otherwise, and with it the whole install). The
// take-over's policy named one "namespace", a word CEL reserves: a chart
// with takeover.nvidiaNamespace set did not install on any Kubernetes
// (found by hack/nvd-switch-check.sh; the policy tests here read variables
// from a map, where any name works).
func TestPolicyVariablesAreCELIdentifiers(t *testing.T) {
	for _, set := range [][]string{nil, takeoverSet} {
		out := helmTemplate(t, set...)
		seen := 0
		for _, doc := range strings.Split(string(out), "\n---") {
			var p admissionv1.ValidatingAdmissionPolicy
			if err := yaml.Unmarshal([]byte(doc), &p); err != nil || p.Kind != "ValidatingAdmissionPolicy" {
				continue
			}
			seen++
			for _, v := range p.Spec.Variables {
				if !celIdent.MatchString(v.Name) || celReserved[v.Name] {
					t.Errorf("values %v: policy %s: variable %q is no CEL identifier; the API server refuses the policy", set, p.Name, v.Name)
				}
			}
		}
		if seen == 0 {
			t.Fatalf("values %v: no ValidatingAdmissionPolicy rendered", set)
		}
	}
}
