// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package opcmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A recorded state (as --dump writes it) with a running pod that asks for
// no GPU and a pending pod; the state has no DeviceClasses.
const recorded = `
driverName: gpu.nvidia.com
pods:
- metadata: {name: cuda, namespace: ml}
  spec: {nodeName: n1, containers: [{name: ctr, image: cuda}]}
  status: {phase: Running}
- metadata: {name: train, namespace: ml}
  spec:
    resourceClaims: [{name: gpu, resourceClaimName: c}]
    containers: [{name: ctr, image: cuda, resources: {claims: [{name: gpu}]}}]
  status: {phase: Pending}
claims:
- metadata: {name: c, namespace: ml, uid: c}
  spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 1}}]}}
`

func runDiagnose(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd := NewDiagnoseCommand("kubectl gpu")
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	var code ExitCode
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &code):
		return out.String(), int(code)
	}
	t.Fatalf("diagnose %v: %v", args, err)
	return "", -1
}

func TestDiagnoseExitCodesAndFormats(t *testing.T) {
	from := filepath.Join(t.TempDir(), "state.yaml")
	if err := os.WriteFile(from, []byte(recorded), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runDiagnose(t, "pod", "ml/cuda", "--from", from)
	if code != 1 || !strings.HasPrefix(out, "BLOCKED: pod ml/cuda\n") || !strings.Contains(out, "no GPU is given to its containers") {
		t.Errorf("running pod without a claim: exit %d\n%s", code, out)
	}
	out, code = runDiagnose(t, "pod", "ml/train", "--from", from, "-o", "json")
	var r struct{ Status, Verdict string }
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 1 || r.Status != "blocked" || !strings.Contains(r.Verdict, `DeviceClass "gpu.nvidia.com", which does not exist`) {
		t.Errorf("pending pod without devices: exit %d, %v\n%s", code, err, out)
	}
	if out, code = runDiagnose(t, "pod", "ml/gone", "--from", from); code != 2 {
		t.Errorf("missing pod: exit %d, want 2 (could not tell)\n%s", code, out)
	}
	if out, code = runDiagnose(t, "pod", "ml/cuda", "--from", filepath.Join(t.TempDir(), "none.yaml")); code != 2 {
		t.Errorf("unreadable state: exit %d, want 2\n%s", code, out)
	}
	for _, tc := range []struct {
		kind, arg, namespace string
		want                 string // NAMESPACE/NAME, "" for an error
	}{
		{"pod", "a/b/c", "", ""},
		{"pod", "/b", "", ""},
		{"node", "ns/n1", "", ""},
		{"claim", "c1", "", "default/c1"},
		{"claim", "c1", "ml", "ml/c1"},
		{"pod", "ml/p", "ml", "ml/p"},
		{"pod", "ml/p", "other", ""},
		{"node", "n1", "ml", "/n1"},
	} {
		o := &diagnoseOptions{cluster: newCluster()}
		o.cluster.from = from // no kubeconfig: NAME alone is in -n, else default
		o.cluster.overrides.Context.Namespace = tc.namespace
		tg, err := o.target(tc.kind, tc.arg)
		if got := tg.Namespace + "/" + tg.Name; tc.want == "" && err == nil || tc.want != "" && (err != nil || got != tc.want) {
			t.Errorf("%s %s -n %q: %s, %v; want %q", tc.kind, tc.arg, tc.namespace, got, err, tc.want)
		}
	}
}
