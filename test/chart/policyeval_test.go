// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"fmt"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// An in-process evaluator of a rendered ValidatingAdmissionPolicy, enough
// to try the chart's policies on objects without a cluster: the same CEL
// (cel-go, with optional types and the strings extension that Kubernetes'
// environment includes since 1.29), the same variables (object, oldObject,
// request, variables) and the same outcome rules: a request is checked only
// when every match condition is true; a validation that is false or fails
// to evaluate denies it (failurePolicy Fail), with its messageExpression,
// else its message. It leaves out what the API server adds (cost limits,
// type checking against the OpenAPI schema, authorizer, params); test/e2e
// runs the same policies in a real API server.

// admissionRequest is what the policy is asked about.
type admissionRequest struct {
	operation string // CREATE, UPDATE or DELETE
	username  string
	nodeName  string // the token's authentication.kubernetes.io/node-name; "" for none
	object    any    // nil on DELETE
	oldObject any    // nil on CREATE
}

// toMap is obj as the API server hands it to CEL: its JSON form.
func toMap(t *testing.T, obj any) map[string]any {
	t.Helper()
	if obj == nil {
		return nil
	}
	if m, ok := obj.(map[string]any); ok {
		return m
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func policyEnv(t *testing.T) *cel.Env {
	t.Helper()
	env, err := cel.NewEnv(
		cel.OptionalTypes(),
		// As the API server's environment: a map or list literal holds
		// one type of value, or dyn() values.
		cel.HomogeneousAggregateLiterals(),
		ext.Strings(ext.StringsVersion(2)),
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
	)
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// evalCEL compiles and runs one expression; a compile error fails the test
// (the API server would refuse the policy).
func evalCEL(t *testing.T, env *cel.Env, expr string, act map[string]any) (ref.Val, error) {
	t.Helper()
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		t.Fatalf("CEL expression does not compile: %v\n%s", iss.Err(), expr)
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatalf("CEL program: %v\n%s", err, expr)
	}
	v, _, err := prg.Eval(act)
	return v, err
}

// admit evaluates policy on req: matched is false when a match condition
// excluded the request; denials holds the message of each failed
// validation, in order.
func admit(t *testing.T, policy admissionv1.ValidatingAdmissionPolicy, req admissionRequest) (matched bool, denials []string) {
	t.Helper()
	env := policyEnv(t)
	// A token without a node has no extra at all (a legacy Secret token,
	// a TokenRequest not bound to a pod): the API server's userInfo then
	// lacks the key, and a policy must refuse it by intent, not by an
	// evaluation error.
	userInfo := map[string]any{"username": req.username}
	if req.nodeName != "" {
		userInfo["extra"] = map[string]any{"authentication.kubernetes.io/node-name": []any{req.nodeName}}
	}
	vars := map[string]any{}
	act := map[string]any{
		"object":    toMap(t, req.object),
		"oldObject": toMap(t, req.oldObject),
		"request": map[string]any{
			"operation": req.operation,
			"userInfo":  userInfo,
		},
		"variables": vars,
	}
	for _, c := range policy.Spec.MatchConditions {
		v, err := evalCEL(t, env, c.Expression, act)
		if err != nil {
			t.Fatalf("match condition %s: %v", c.Name, err)
		}
		if v != types.True {
			return false, nil
		}
	}
	// Variables in order, each seeing the ones before it; one that fails
	// fails only the validations that read it, as the API server's lazy
	// evaluation does.
	for _, v := range policy.Spec.Variables {
		val, err := evalCEL(t, env, v.Expression, act)
		if err != nil {
			vars[v.Name] = types.NewErr("variable %s: %v", v.Name, err)
			continue
		}
		vars[v.Name] = val
	}
	for i, v := range policy.Spec.Validations {
		val, err := evalCEL(t, env, v.Expression, act)
		if err == nil && val == types.True {
			continue
		}
		msg := v.Message
		if v.MessageExpression != "" {
			m, merr := evalCEL(t, env, v.MessageExpression, act)
			if merr != nil {
				t.Errorf("validation %d: messageExpression fails (%v); the API server would fall back to a generic message:\n%s", i, merr, v.MessageExpression)
			} else if s, ok := m.Value().(string); ok {
				msg = s
			}
		}
		if err != nil {
			// failurePolicy Fail denies, with a generic message: a bug.
			t.Errorf("validation %d fails to evaluate on a %s: %v\n%s", i, req.operation, err, v.Expression)
			msg = fmt.Sprintf("%s (expression failed: %v)", msg, err)
		}
		denials = append(denials, msg)
	}
	return true, denials
}
