// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregv1 "k8s.io/api/admissionregistration/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// TestWebhookLatency measures what the webhook adds to creating a claim
// that carries this driver's config: the median time of the apiserver
// round trip (the create request kubectl sends, from client-go) and of a
// whole `kubectl create`, with the webhook and with its
// ValidatingWebhookConfiguration removed. It reports; it asserts nothing
// about time (the machine is shared).
func TestWebhookLatency(t *testing.T) {
	kubectl(t, "apply", "-f", repoRoot+"/demo/specs/00-namespace.yaml")
	waitWebhookServing(t)
	// client-go's default rate limit (5/s) would pace the creates.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	fast := kubernetes.NewForConfigOrDie(cfg)
	const rounds, perRound, kubectlPerRound = 3, 20, 10
	var api, cli [2][]time.Duration // [0] with the webhook, [1] without
	for r := 0; r < rounds; r++ {
		for i, with := range []bool{true, false} {
			var restore func()
			if !with {
				restore = removeWebhookConfig(t)
			}
			api[i] = append(api[i], timeCreates(t, fast, fmt.Sprintf("lat-%d-%d", r, i), perRound)...)
			cli[i] = append(cli[i], timeKubectlCreates(t, fmt.Sprintf("latk-%d-%d", r, i), kubectlPerRound)...)
			if restore != nil {
				restore()
			}
		}
	}
	report := func(what string, d [2][]time.Duration) {
		w, wo := median(d[0]), median(d[1])
		t.Logf("%s: median with webhook %v, without %v, added %v (n=%d each)", what, w.Round(10*time.Microsecond), wo.Round(10*time.Microsecond), (w - wo).Round(10*time.Microsecond), len(d[0]))
	}
	report("apiserver create round trip", api)
	report("kubectl create", cli)
	t.Logf("webhook process RSS after the run: %s", webhookRSS())
}

// webhookRSS reads the resident memory of the webhook processes on this
// host (the local cluster's node) from /proc.
func webhookRSS() string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(cmd, []byte("/usr/bin/gpu-dra-webhook\x00")) {
			continue
		}
		status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				out = append(out, strings.Join(strings.Fields(strings.TrimPrefix(line, "VmRSS:")), " "))
			}
		}
	}
	if len(out) == 0 {
		return "no webhook process found"
	}
	return strings.Join(out, ", ")
}

const latencyParams = `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","sharing":{"strategy":"MPS","mpsConfig":{"defaultActiveThreadPercentage":50}}}`

func timeCreates(t *testing.T, client kubernetes.Interface, prefix string, n int) []time.Duration {
	t.Helper()
	ctx := context.Background()
	var out []time.Duration
	for i := 0; i < n; i++ {
		c := latencyClaim(fmt.Sprintf("%s-%d", prefix, i))
		start := time.Now()
		if _, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", c.Name, err)
		}
		out = append(out, time.Since(start))
	}
	deleteLatencyClaims(t)
	return out
}

func timeKubectlCreates(t *testing.T, prefix string, n int) []time.Duration {
	t.Helper()
	var out []time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		manifest := claimYAML(name, false, "gpu.nvidia.com", driverName, configHeader+`, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50}}`)
		cmd := exec.Command("kubectl", "create", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		start := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl create %s: %v\n%s", name, err, b)
		}
		out = append(out, time.Since(start))
	}
	deleteLatencyClaims(t)
	return out
}

func deleteLatencyClaims(t *testing.T) {
	t.Helper()
	list, err := client.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if strings.HasPrefix(c.Name, "lat") {
			_ = client.ResourceV1().ResourceClaims(ns).Delete(context.Background(), c.Name, metav1.DeleteOptions{})
		}
	}
}

func latencyClaim(name string) *resourceapi.ResourceClaim {
	c := claimObject(driverName, latencyParams)
	c.GenerateName, c.Name = "", name
	return c
}

// removeWebhookConfig deletes the ValidatingWebhookConfiguration and waits
// until the apiserver admits a bad config; the returned func puts it back
// and waits until the webhook denies again.
func removeWebhookConfig(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	api := client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	saved, err := api.Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Delete(ctx, webhookName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the apiserver to drop the webhook", 30*time.Second, func() (bool, string) {
		err := dryRunClaim(driverName, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","bad":1}`)
		return err == nil, fmt.Sprint(err)
	})
	restored := false
	restore = func() {
		t.Helper()
		if restored {
			return
		}
		restored = true
		again := &admissionregv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels, Annotations: saved.Annotations},
			Webhooks:   saved.Webhooks,
		}
		if _, err := api.Create(ctx, again, metav1.CreateOptions{}); err != nil {
			t.Fatalf("put the webhook configuration back: %v", err)
		}
		waitWebhookServing(t)
	}
	t.Cleanup(restore) // also when the test fails before restoring
	return restore
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
