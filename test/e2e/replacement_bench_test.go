// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// BenchmarkReplacementPod measures how long a replacement pod waits for the
// GPU of a pod deleted with grace 0 or forced (issue 55, defect 5): the API
// deletes the old pod and deallocates its claim before the kubelet's
// unprepare of it reaches the plugin, and the replacement's claim is
// allocated the same GPU. Each round creates the old pod, deletes it,
// creates the replacement at once (both on GPU 0), and times the deletion
// to the replacement's Running; p50 and p99 (nearest rank) per case are
// reported as metrics and every sample is logged.
//
// Cases: the old pod ran, or never started because its other claim failed
// at prepare (a bad opaque config; the webhook is scaled down meanwhile);
// deleted with terminationGracePeriodSeconds: 0, or forced
// (gracePeriodSeconds: 0 on the delete, kubectl delete --force
// --grace-period=0).
//
// It is a benchmark, not a test: nothing is asserted on the times. Run it
// alone on an otherwise idle local cluster (make e2e's, GPU 0 free), once
// with the plugin image before a change and once after:
//
//	KUBECONFIG=... go test -tags e2e -run '^$' -bench BenchmarkReplacementPod -benchtime=1x -timeout 3h ./test/e2e/
//
// GPU_DRA_BENCH_ROUNDS sets the rounds per case (default 20).
func BenchmarkReplacementPod(b *testing.B) {
	rounds := 20
	if v := os.Getenv("GPU_DRA_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("GPU_DRA_BENCH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	benchNamespace(b, replaceNS)
	benchApply(b, gpuTemplate("gpu-zero", replaceNS, "device.attributes['gpu.nvidia.com'].index == 0"))
	for _, old := range []string{"ran", "never-started"} {
		for _, del := range []string{"grace0", "force"} {
			b.Run(old+"/"+del, func(b *testing.B) {
				if old == "never-started" {
					// The bad config that fails the old pod's other claim at
					// prepare would be refused at admission.
					restore := stopWebhookFor(b)
					defer restore()
					benchApply(b, badConfigTemplate(replaceNS))
				}
				var samples []time.Duration
				for range b.N {
					for i := range rounds {
						samples = append(samples, replacementRound(b, old, del, i))
					}
				}
				reportPercentiles(b, samples)
			})
		}
	}
}

const replaceNS = "gpu-replace"

// replaceRounds counts the rounds of the benchmark so far.
var replaceRounds int

// replacementRound runs one round and returns the time from the old pod's
// deletion to the replacement's Running.
func replacementRound(b *testing.B, old, del string, i int) time.Duration {
	b.Helper()
	ctx := context.Background()
	pods := client.CoreV1().Pods(replaceNS)
	specsBefore := len(cdiSpecs())
	// Names never repeat: the events of an earlier round's pod would
	// answer for this one.
	replaceRounds++
	oldName := fmt.Sprintf("old-%s-%s-%d", old, del, replaceRounds)
	newName := fmt.Sprintf("new-%s-%s-%d", old, del, replaceRounds)
	grace := int64(30)
	if del == "grace0" {
		grace = 0
	}
	claims := []string{"gpu"}
	if old == "never-started" {
		claims = append(claims, "bad")
	}
	benchApply(b, replacementPod(oldName, grace, claims))
	if old == "ran" {
		benchWait(b, "pod "+oldName+" Running", 120*time.Second, func() (bool, string) {
			p, err := pods.Get(ctx, oldName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
		})
	} else {
		// The kubelet called prepare for both claims: the GPU 0 claim is
		// prepared, the other refused, and the pod does not start.
		benchWait(b, "the bad claim of "+oldName+" refused at prepare", 120*time.Second, func() (bool, string) {
			ev := replacePodEvents(b, oldName)
			return strings.Contains(ev, "intervall"), ev
		})
	}
	start := time.Now()
	opts := metav1.DeleteOptions{}
	if del == "force" {
		opts.GracePeriodSeconds = ptr.To[int64](0)
	}
	if err := pods.Delete(ctx, oldName, opts); err != nil {
		b.Fatal(err)
	}
	benchApply(b, replacementPod(newName, 0, []string{"gpu"}))
	benchWait(b, "replacement "+newName+" Running", 300*time.Second, func() (bool, string) {
		p, err := pods.Get(ctx, newName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	took := time.Since(start)
	b.Logf("%s/%s round %d: replacement Running %s after the deletion", old, del, i, took.Round(time.Millisecond))

	// Next round on a clean node: both pods and their claims gone, and
	// the plugin back to the CDI specs it had before.
	_ = pods.Delete(ctx, newName, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	for _, name := range []string{oldName, newName} {
		benchWait(b, "pod "+name+" gone", 120*time.Second, func() (bool, string) {
			_, err := pods.Get(ctx, name, metav1.GetOptions{})
			return err != nil, "still there"
		})
	}
	benchWait(b, "the round's claims unprepared", 180*time.Second, func() (bool, string) {
		n := len(cdiSpecs())
		return n <= specsBefore, fmt.Sprintf("%d CDI specs, %d before the round", n, specsBefore)
	})
	return took
}

// replacementPod is a pod of one container using a claim from a template
// per name: "gpu" (GPU 0) and "bad" (bad-config, refused at prepare).
func replacementPod(name string, grace int64, claims []string) string {
	templates := map[string]string{"gpu": "gpu-zero", "bad": "bad-config"}
	var refs, uses []string
	for _, c := range claims {
		refs = append(refs, fmt.Sprintf("{name: %s, resourceClaimTemplateName: %s}", c, templates[c]))
		uses = append(uses, "{name: "+c+"}")
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: %d
  resourceClaims: [%s]
  containers: [{name: ctr, image: localhost/busybox:latest, imagePullPolicy: IfNotPresent, command: [sleep, "3600"], resources: {claims: [%s]}}]
`, name, replaceNS, grace, strings.Join(refs, ", "), strings.Join(uses, ", "))
}

// reportPercentiles reports p50 and p99 (nearest rank) in seconds.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		return
	}
	sorted := slices.Clone(samples)
	slices.Sort(sorted)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(sorted))+0.999999) - 1 // nearest rank, 1-based
		return sorted[max(0, min(i, len(sorted)-1))]
	}
	p50, p99 := rank(0.50), rank(0.99)
	b.ReportMetric(p50.Seconds(), "p50-s")
	b.ReportMetric(p99.Seconds(), "p99-s")
	b.Logf("%d rounds: p50 %s, p99 %s, max %s", len(sorted), p50.Round(time.Millisecond), p99.Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond))
}

// The helpers of helpers_test.go take a *testing.T; these are the few a
// benchmark needs.

func benchKubectl(tb testing.TB, stdin string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("kubectl", args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func benchApply(tb testing.TB, yaml string) {
	tb.Helper()
	benchKubectl(tb, yaml, "apply", "-f", "-")
}

func benchWait(tb testing.TB, what string, timeout time.Duration, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(100 * time.Millisecond) // the figures are in seconds
	}
}

// benchNamespace creates a namespace that the benchmark's cleanup deletes.
func benchNamespace(tb testing.TB, name string) {
	tb.Helper()
	_ = exec.Command("kubectl", "delete", "namespace", name, "--ignore-not-found", "--wait=true").Run()
	benchKubectl(tb, "", "create", "namespace", name)
	benchWait(tb, "the default ServiceAccount of "+name, 60*time.Second, func() (bool, string) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	tb.Cleanup(func() {
		if out, err := exec.Command("kubectl", "delete", "namespace", name, "--ignore-not-found", "--wait=true", "--timeout=180s").CombinedOutput(); err != nil {
			tb.Errorf("deleting namespace %s: %v\n%s", name, err, out)
		}
	})
}

// stopWebhookFor scales the admission webhook to no pods, and returns the
// func that scales it back and waits until it denies a bad config again.
func stopWebhookFor(tb testing.TB) (restore func()) {
	tb.Helper()
	ctx := context.Background()
	d, err := client.AppsV1().Deployments(driverNS).Get(ctx, webhookName, metav1.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	replicas := ptr.Deref(d.Spec.Replicas, 1)
	benchKubectl(tb, "", "scale", "deployment", "-n", driverNS, webhookName, "--replicas=0")
	benchWait(tb, "webhook pods gone", 60*time.Second, func() (bool, string) {
		pods, err := client.CoreV1().Pods(driverNS).List(ctx, metav1.ListOptions{LabelSelector: webhookPods})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d pods", len(pods.Items))
	})
	return func() {
		tb.Helper()
		benchKubectl(tb, "", "scale", "deployment", "-n", driverNS, webhookName, fmt.Sprintf("--replicas=%d", replicas))
		benchWait(tb, "the webhook to deny a bad config", 90*time.Second, func() (bool, string) {
			err := dryRunClaim(driverName, `{"apiVersion":"resource.nvidia.com/v1beta1","kind":"GpuConfig","bad":1}`)
			return err != nil && strings.Contains(err.Error(), "denied the request"), fmt.Sprint(err)
		})
	}
}

// replacePodEvents are a pod's events in the benchmark's namespace, one a line.
func replacePodEvents(tb testing.TB, name string) string {
	tb.Helper()
	list, err := client.CoreV1().Events(replaceNS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + name})
	if err != nil {
		tb.Fatal(err)
	}
	var s strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&s, "%s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	return s.String()
}
