// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// The MPS daemon-pod policy admits one exact pod (issue 46): not a list of
// forbidden fields, which was walked around twice, but the pod pkg/sharing
// PodRunner.Pod builds. This test holds it to that by construction: every
// field of that pod, as the API server hands it to CEL, is changed one at a
// time (a string gets a suffix, a number grows, a bool flips, a list gets
// one more element, an object one more key), and each change must be
// refused. A field the policy forgot to pin, or one it admits by shape
// only, shows up here by its path.
func TestChartMPSPolicyAdmitsOnlyTheExactDaemonPod(t *testing.T) {
	for _, m := range policyModes {
		t.Run(m.name, func(t *testing.T) {
			// As the API server hands it to the policy on a production
			// cluster (a globalDefault PriorityClass, issue 55); the
			// chart's class is a built-in one, so the policy pins its
			// priority and preemption policy too.
			legit, _ := daemonPodOn(t, ownNode, m.set...)
			if err := mutateAsAPIServer(t, legit, productionCluster); err != nil {
				t.Fatal(err)
			}
			policy := mpsPolicy(t, m.set...)
			base := toMap(t, legit)
			mutations := 0
			// What a client sends: metadata and spec (the API server
			// resets status on create and decodes apiVersion and kind).
			var all []podMutation
			for _, top := range []string{"metadata", "spec"} {
				all = append(all, mutationsOf(base[top], top)...)
			}
			for _, mu := range all {
				mutations++
				obj := deepCopyJSON(base)
				mu.apply(obj)
				matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: obj})
				if !matched || len(denials) == 0 {
					t.Errorf("%s (%s): admitted; the policy must admit only the daemon pod the plugin builds", mu.path, mu.what)
				}
			}
			// The pod has some 40 leaves and 20 objects and lists: a
			// walk that found far fewer tested nothing.
			if mutations < 50 {
				t.Errorf("only %d mutations of the daemon pod; the walk is broken", mutations)
			}
			t.Logf("%d single-field changes of the daemon pod, each refused", mutations)
		})
	}
}

type podMutation struct {
	path, what string
	apply      func(obj map[string]any)
}

// mutationsOf lists one change per leaf, list and object under v, each
// applied through its path from the root.
func mutationsOf(v any, path string) []podMutation {
	var out []podMutation
	switch x := v.(type) {
	case map[string]any:
		out = append(out, podMutation{path: join(path, "zzUnknown"), what: "one more key", apply: func(obj map[string]any) {
			at(obj, path).(map[string]any)["zzUnknown"] = "x"
		}})
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, mutationsOf(x[k], join(path, k))...)
		}
	case []any:
		out = append(out, podMutation{path: path, what: "one more element", apply: func(obj map[string]any) {
			setAt(obj, path, append(append([]any{}, at(obj, path).([]any)...), deepCopyValue(x[0])))
		}})
		for i := range x {
			out = append(out, mutationsOf(x[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
	case string:
		out = append(out, podMutation{path: path, what: "string changed", apply: func(obj map[string]any) { setAt(obj, path, x+"x") }})
	case bool:
		out = append(out, podMutation{path: path, what: "bool flipped", apply: func(obj map[string]any) { setAt(obj, path, !x) }})
	case int64:
		out = append(out, podMutation{path: path, what: "number changed", apply: func(obj map[string]any) { setAt(obj, path, x+1) }})
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// steps splits a path of keys and [i] indexes; keys hold no dots here but
// annotation and label keys do, so a key is matched against the object.
func at(obj map[string]any, path string) any {
	var cur any = obj
	for _, s := range steps(obj, path) {
		cur = s.get(cur)
	}
	return cur
}

func setAt(obj map[string]any, path string, v any) {
	ss := steps(obj, path)
	var cur any = obj
	for _, s := range ss[:len(ss)-1] {
		cur = s.get(cur)
	}
	ss[len(ss)-1].set(cur, v)
}

type step struct {
	key   string
	index int // -1 for a key
}

func (s step) get(cur any) any {
	if s.index >= 0 {
		return cur.([]any)[s.index]
	}
	return cur.(map[string]any)[s.key]
}

func (s step) set(cur, v any) {
	if s.index >= 0 {
		cur.([]any)[s.index] = v
		return
	}
	cur.(map[string]any)[s.key] = v
}

func steps(obj map[string]any, path string) []step {
	var out []step
	var cur any = obj
	rest := path
	for rest != "" {
		rest = strings.TrimPrefix(rest, ".")
		if strings.HasPrefix(rest, "[") {
			end := strings.Index(rest, "]")
			var i int
			fmt.Sscanf(rest[1:end], "%d", &i)
			s := step{index: i}
			out, cur, rest = append(out, s), s.get(cur), rest[end+1:]
			continue
		}
		// The longest key of this object that the path starts with
		// (label keys hold dots and slashes).
		m := cur.(map[string]any)
		best := ""
		for k := range m {
			if (rest == k || strings.HasPrefix(rest, k+".") || strings.HasPrefix(rest, k+"[")) && len(k) > len(best) {
				best = k
			}
		}
		if best == "" {
			// A key the mutation adds.
			best = rest
		}
		s := step{key: best, index: -1}
		out, rest = append(out, s), rest[len(best):]
		if v, ok := m[best]; ok {
			cur = v
		}
	}
	return out
}

func deepCopyJSON(v any) map[string]any {
	return deepCopyValue(v).(map[string]any)
}

func deepCopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopyValue(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopyValue(e)
		}
		return l
	default:
		return x
	}
}
