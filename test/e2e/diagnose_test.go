// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const diagNS = "gpu-diagnose"

// TestDiagnose runs `gpudra diagnose` against the local cluster for the
// three cases users meet most: a selector no device satisfies, a ninth
// H100 on a node with eight, and an invalid opaque config. It uses its own
// namespace and leaves no claim behind.
func TestDiagnose(t *testing.T) {
	gpudra := filepath.Join(t.TempDir(), "gpudra")
	build := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", gpudra, "./cmd/gpudra")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build gpudra: %v\n%s", err, out)
	}
	applyYAML(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+diagNS+"}\n")
	t.Cleanup(func() { deleteNamespace(t, diagNS) })

	t.Run("UnsatisfiableSelector", func(t *testing.T) {
		applyYAML(t, gpuTemplate("b300", diagNS, "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B300'")+diagPod("unsatisfiable", "b300"))
		waitEvent(t, "unsatisfiable", "FailedScheduling")
		text, r := diagnoseBoth(t, gpudra, 1, "pod", diagNS+"/unsatisfiable")
		wantIn(t, r.Verdict, "rejects all 8 devices", `productName is "NVIDIA H100 80GB HBM3" (8)`, "NVIDIA B300")
		wantIn(t, text, "near miss ")
	})

	t.Run("NinthH100", func(t *testing.T) {
		applyYAML(t, `
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: eight-h100, namespace: gpu-diagnose}
spec:
  spec:
    devices:
      requests:
      - name: gpus
        exactly: {deviceClassName: gpu.nvidia.com, count: 8}
---
`+gpuTemplate("one-h100", diagNS, "device.attributes['gpu.nvidia.com'].productName.matches('H100')")+diagPod("eight-h100", "eight-h100"))
		waitPodRunning(t, "eight-h100")
		applyYAML(t, diagPod("ninth-h100", "one-h100"))
		waitEvent(t, "ninth-h100", "FailedScheduling")
		_, r := diagnoseBoth(t, gpudra, 1, "pod", diagNS+"/ninth-h100")
		// GPU 7 is offered for memory fractions (hack/cluster/deploy.sh):
		// the claim holds it as a share of all its memory.
		wantIn(t, r.Verdict, "0 of the 8 matching devices are free", "7 allocated to gpu-diagnose/eight-h100-gpus-", "(pod gpu-diagnose/eight-h100)", "1 shared GPU has too little capacity left")

		_, ok := diagnoseBoth(t, gpudra, 0, "pod", diagNS+"/eight-h100")
		wantIn(t, ok.Verdict, "is Running on node")
		node := ok.Pod.Node
		text, n := diagnoseBoth(t, gpudra, 0, "node", node)
		// Registration is unknown: the plugin's and the kubelet's metrics
		// are reachable only through pods/proxy and nodes/proxy, which the
		// CLI does not use, and it says so.
		wantIn(t, n.Verdict, "serves 8 GPUs", "registered: unknown", "8 allocated to 1 claim, 0 free", "h100x8")
		wantIn(t, text, "pool "+node+": generation", "claim gpu-diagnose/eight-h100-gpus-", "Could not read:", "not read, since they are reachable only through the API server's pods/proxy and nodes/proxy")
	})

	t.Run("BadConfig", func(t *testing.T) {
		deleteDiagPods(t, "eight-h100", "ninth-h100")
		// The admission webhook would refuse this template at once (see
		// TestWebhook); here the pod must get as far as prepare.
		restoreWebhook := stopWebhook(t)
		defer restoreWebhook()
		applyYAML(t, badConfigTemplate(diagNS)+diagPod("bad-config", "bad-config"))
		waitEvent(t, "bad-config", "FailedPrepareDynamicResources")
		_, r := diagnoseBoth(t, gpudra, 1, "pod", diagNS+"/bad-config")
		wantIn(t, r.Verdict, "cannot start", `unknown field "sharing.timeSlicingConfig.intervall"`, "devices.config[0]")
		if r.Prepare == nil || r.Prepare.Step != "config" {
			t.Errorf("failed step %+v, want config", r.Prepare)
		}
	})
}

func diagPod(name, template string) string {
	return `
---
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: gpu-diagnose}
spec:
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpus, resourceClaimTemplateName: ` + template + `}]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [{name: gpus}]}}]
`
}

// diagReport is the part of `gpudra diagnose -o json` the test reads.
type diagReport struct {
	Status  string `json:"status"`
	Verdict string `json:"verdict"`
	Pod     *struct {
		Node string `json:"node"`
	} `json:"pod"`
	Prepare *struct {
		Step string `json:"failedStep"`
	} `json:"prepare"`
}

// diagnoseBoth runs gpudra diagnose in text and JSON, checks both exit
// codes, logs the text (the README shows it) and returns both.
func diagnoseBoth(t *testing.T, gpudra string, wantExit int, kind, target string) (string, diagReport) {
	t.Helper()
	run := func(args ...string) string {
		cmd := exec.Command(gpudra, append([]string{"diagnose", kind, target}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := cmd.Output()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("gpudra diagnose %s %s: %v", kind, target, err)
		}
		if code != wantExit {
			t.Fatalf("gpudra diagnose %s %s %v exited %d, want %d:\n%s", kind, target, args, code, wantExit, out)
		}
		return string(out)
	}
	text := run()
	t.Logf("$ gpudra diagnose %s %s   # exit %d\n%s", kind, target, wantExit, text)
	var r diagReport
	if err := json.Unmarshal([]byte(run("-o", "json")), &r); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	return text, r
}

func wantIn(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("missing %q in:\n%s", sub, s)
		}
	}
}

func waitEvent(t *testing.T, podName, reason string) {
	t.Helper()
	waitFor(t, reason+" event of "+podName, 90*time.Second, func() (bool, string) {
		list, err := client.CoreV1().Events(diagNS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + podName})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range list.Items {
			if e.Reason == reason {
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, strings.Join(seen, ",")
	})
}

func waitPodRunning(t *testing.T, name string) {
	t.Helper()
	waitFor(t, "pod "+name+" Running", 90*time.Second, func() (bool, string) {
		p, err := client.CoreV1().Pods(diagNS).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == "Running", string(p.Status.Phase)
	})
}

func deleteDiagPods(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		_ = client.CoreV1().Pods(diagNS).Delete(context.Background(), n, metav1.DeleteOptions{})
	}
	for _, n := range names {
		waitFor(t, "pod "+n+" gone", 60*time.Second, func() (bool, string) {
			_, err := client.CoreV1().Pods(diagNS).Get(context.Background(), n, metav1.GetOptions{})
			return apierrors.IsNotFound(err), "still there"
		})
	}
}

// deleteNamespace removes the test's namespace and waits until its claims
// are gone, so that the next test finds every GPU free.
func deleteNamespace(t *testing.T, name string) {
	ctx := context.Background()
	_ = client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	waitFor(t, "namespace "+name+" gone", 120*time.Second, func() (bool, string) {
		_, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "still there"
	})
}
