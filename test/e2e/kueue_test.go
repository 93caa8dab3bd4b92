// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Kueue on the local cluster (hack/cluster/kueue.sh): Jobs whose pods claim
// devices through ResourceClaimTemplates, admitted against a ClusterQueue
// whose quota Kueue charges per DeviceClass (resources.deviceClassMappings).

const (
	kueueNS      = "gpu-kueue"
	kueueCQ      = "e2e-gpus"
	kueueFlavor  = "e2e-default"
	kueueLQ      = "gpus"
	migClass     = "mig-1g.10gb.nvidia.com"
	wholeGPUTmpl = "whole-gpu"
	migTmpl      = "mig-1g"
)

// kueueConfig is the Kueue configuration of docs/claims.md ("Quotas with
// Kueue"): the test runs Kueue with its deviceClassMappings.
var kueueConfig = filepath.Join(repoRoot, "docs", "examples", "kueue-config.yaml")

// kueueResources returns the quota resources kueueConfig maps the classes
// gpu.nvidia.com and mig-1g.10gb.nvidia.com to, which must differ: a MIG
// device is charged on its own resource.
func kueueResources(t *testing.T) (gpuRes, migRes string) {
	t.Helper()
	data, err := os.ReadFile(kueueConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Resources struct {
			DeviceClassMappings []struct {
				Name             string   `json:"name"`
				DeviceClassNames []string `json:"deviceClassNames"`
			} `json:"deviceClassMappings"`
		} `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s: %v", kueueConfig, err)
	}
	for _, m := range cfg.Resources.DeviceClassMappings {
		if slices.Contains(m.DeviceClassNames, driverName) {
			gpuRes = m.Name
		}
		if slices.Contains(m.DeviceClassNames, migClass) {
			migRes = m.Name
		}
	}
	if gpuRes == "" || migRes == "" || gpuRes == migRes {
		t.Fatalf("%s: resources.deviceClassMappings map %s to %q and %s to %q; want each mapped, to different resources", kueueConfig, driverName, gpuRes, migClass, migRes)
	}
	return gpuRes, migRes
}

// startKueue runs hack/cluster/kueue.sh up with config; the test's cleanup
// takes Kueue down again (its CRDs, webhooks and manager).
func startKueue(t *testing.T, config string) {
	t.Helper()
	t.Cleanup(func() {
		if out, err := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "kueue.sh"), "down").CombinedOutput(); err != nil {
			t.Errorf("kueue.sh down: %v\n%s", err, out)
		}
	})
	out, err := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "kueue.sh"), "up", config).CombinedOutput()
	if err != nil {
		t.Fatalf("kueue.sh up: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

func kueueQueues(gpuRes, migRes string) string {
	return fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: %[3]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[4]s}
spec:
  namespaceSelector: {}
  # A head Job that does not fit lets later ones of other classes in.
  queueingStrategy: BestEffortFIFO
  resourceGroups:
  - coveredResources: [%[1]s, %[2]s]
    flavors:
    - name: %[3]s
      resources:
      - {name: %[1]s, nominalQuota: 2}
      - {name: %[2]s, nominalQuota: 3}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %[5]s, namespace: %[6]s}
spec: {clusterQueue: %[4]s}
`, gpuRes, migRes, kueueFlavor, kueueCQ, kueueLQ, kueueNS)
}

// kueueTemplate asks for one device of a class and nothing else: Kueue
// v0.17 refuses templates with CEL selectors, constraints or config
// (pkg/dra/claims.go countDevicesPerClass).
func kueueTemplate(name, class string) string {
	return fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: %s, namespace: %s}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: %s}
`, name, kueueNS, class)
}

// kueueJob is a Job in the test's LocalQueue whose pod claims a device
// from template, prints what it sees and runs until the test finishes it.
// No suspend: Kueue's Job webhook suspends it at creation.
func kueueJob(name, template string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: %s
  namespace: %s
  labels: {kueue.x-k8s.io/queue-name: %s}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 1
      resourceClaims: [{name: gpu, resourceClaimTemplateName: %s}]
      containers:
      - name: ctr
        image: localhost/busybox:latest
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'nvidia-smi -L; until [ -e /tmp/done ]; do sleep 0.2; done']
        resources: {claims: [{name: gpu}]}
`, name, kueueNS, kueueLQ, template)
}

// kueueWorkload is what the test reads of a Kueue Workload (v1beta2).
type kueueWorkload struct {
	Metadata struct {
		Name            string `json:"name"`
		OwnerReferences []struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"ownerReferences"`
	} `json:"metadata"`
	Status struct {
		Conditions []metav1.Condition `json:"conditions"`
		Admission  *struct {
			ClusterQueue      string `json:"clusterQueue"`
			PodSetAssignments []struct {
				ResourceUsage corev1.ResourceList `json:"resourceUsage"`
			} `json:"podSetAssignments"`
		} `json:"admission"`
	} `json:"status"`
}

func (w *kueueWorkload) condition(typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(w.Status.Conditions, typ)
}

// usage is what the admission charged, resource by resource.
func (w *kueueWorkload) usage() map[string]int64 {
	u := map[string]int64{}
	if w.Status.Admission != nil {
		for _, a := range w.Status.Admission.PodSetAssignments {
			for r, q := range a.ResourceUsage {
				u[string(r)] += q.Value()
			}
		}
	}
	return u
}

// workloadOf returns the Workload Kueue made for a Job, nil before it has.
func workloadOf(t *testing.T, job string) *kueueWorkload {
	t.Helper()
	var list struct {
		Items []kueueWorkload `json:"items"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "get", "workloads.kueue.x-k8s.io", "-n", kueueNS, "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	for i, w := range list.Items {
		for _, o := range w.Metadata.OwnerReferences {
			if o.Kind == "Job" && o.Name == job {
				return &list.Items[i]
			}
		}
	}
	return nil
}

// jobPods lists the pods of a Job.
func jobPods(t *testing.T, job string) []corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(kueueNS).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

// waitAdmittedRunning waits until Kueue admitted the Job charging want and
// its one pod runs, and returns the pod's name.
func waitAdmittedRunning(t *testing.T, job string, want map[string]int64) string {
	t.Helper()
	waitFor(t, "Workload of Job "+job+" admitted", 60*time.Second, func() (bool, string) {
		w := workloadOf(t, job)
		if w == nil {
			return false, "no Workload"
		}
		c := w.condition("Admitted")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", w.Status.Conditions)
	})
	if got := workloadOf(t, job).usage(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Job %s: Kueue charged %v, want %v", job, got, want)
	}
	var name string
	waitFor(t, "the pod of Job "+job+" Running", 90*time.Second, func() (bool, string) {
		pods := jobPods(t, job)
		if len(pods) != 1 {
			return false, fmt.Sprintf("%d pods", len(pods))
		}
		name = pods[0].Name
		return pods[0].Status.Phase == corev1.PodRunning, string(pods[0].Status.Phase)
	})
	return name
}

// waitQueued waits until Kueue has tried the Job and left it waiting for
// quota of resource: Workload without quota, Job suspended, no pod (so
// nothing Pending on the scheduler either).
func waitQueued(t *testing.T, job, resource string) {
	t.Helper()
	waitFor(t, "Job "+job+" waiting for "+resource+" quota", 60*time.Second, func() (bool, string) {
		w := workloadOf(t, job)
		if w == nil {
			return false, "no Workload"
		}
		c := w.condition("QuotaReserved")
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, resource), fmt.Sprintf("%+v", w.Status.Conditions)
	})
	j, err := client.BatchV1().Jobs(kueueNS).Get(context.Background(), job, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Errorf("Job %s waits for quota but is not suspended", job)
	}
	if pods := jobPods(t, job); len(pods) != 0 {
		t.Errorf("Job %s waits for quota but has pod %s (%s)", job, pods[0].Name, pods[0].Status.Phase)
	}
	// Nor had one: Kueue's Job webhook suspended it at creation, before the
	// Job controller could make a pod that Kueue would then delete.
	evs, err := client.CoreV1().Events(kueueNS).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.kind=Job,involvedObject.name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason == "SuccessfulCreate" {
			t.Errorf("Job %s waits for quota but its controller made a pod before: %s", job, e.Message)
		}
	}
	c := workloadOf(t, job).condition("QuotaReserved")
	t.Logf("%s queued: %s", job, c.Message)
}

// finishJob lets the Job's pod exit 0 and waits for the Job to complete.
func finishJob(t *testing.T, job string) {
	t.Helper()
	for _, p := range jobPods(t, job) {
		kubectl(t, "-n", kueueNS, "exec", p.Name, "--", "touch", "/tmp/done")
	}
	waitFor(t, "Job "+job+" complete", 60*time.Second, func() (bool, string) {
		j, err := client.BatchV1().Jobs(kueueNS).Get(context.Background(), job, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return j.Status.Succeeded == 1, fmt.Sprintf("succeeded %d, failed %d", j.Status.Succeeded, j.Status.Failed)
	})
}

// reserved returns the ClusterQueue's reserved quota, resource by resource.
func reserved(t *testing.T) map[string]int64 {
	t.Helper()
	var cq struct {
		Status struct {
			FlavorsReservation []struct {
				Resources []struct {
					Name  string            `json:"name"`
					Total resource.Quantity `json:"total"`
				} `json:"resources"`
			} `json:"flavorsReservation"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "get", "clusterqueues.kueue.x-k8s.io", kueueCQ, "-o", "json")), &cq); err != nil {
		t.Fatal(err)
	}
	r := map[string]int64{}
	for _, f := range cq.Status.FlavorsReservation {
		for _, res := range f.Resources {
			r[res.Name] += res.Total.Value()
		}
	}
	return r
}

// TestKueue: Kueue admits Jobs whose pods claim GPUs through templates
// against a ClusterQueue of 2 whole GPUs and 3 MIG 1g.10gb devices. Two
// whole-GPU Jobs run; the third waits in the queue, suspended and without
// a pod, until one of them finishes. MIG Jobs are charged on their own
// resource: three are admitted while the whole-GPU quota is full, a fourth
// waits for one of them.
func TestKueue(t *testing.T) {
	requireCleanNode(t)
	start := time.Now()
	gpuRes, migRes := kueueResources(t)
	startKueue(t, kueueConfig)
	testNamespace(t, kueueNS)
	applyYAML(t, kueueQueues(gpuRes, migRes))
	applyYAML(t, kueueTemplate(wholeGPUTmpl, driverName))
	applyYAML(t, kueueTemplate(migTmpl, migClass))
	t.Logf("Kueue, queues and templates ready in %.1fs", time.Since(start).Seconds())

	gpu := map[string]int64{gpuRes: 1}
	mig := map[string]int64{migRes: 1}
	applyYAML(t, kueueJob("gpu-1", wholeGPUTmpl))
	applyYAML(t, kueueJob("gpu-2", wholeGPUTmpl))
	seen := map[string]string{}
	for _, j := range []string{"gpu-1", "gpu-2"} {
		p := waitAdmittedRunning(t, j, gpu)
		_, uuid, migs := gpuOfIn(t, kueueNS, p, "")
		if len(migs) != 0 || seen[uuid] != "" {
			t.Fatalf("Job %s sees GPU %s and MIG devices %v; want a whole GPU of its own (seen: %v)", j, uuid, migs, seen)
		}
		seen[uuid] = j
	}
	applyYAML(t, kueueJob("gpu-3", wholeGPUTmpl))
	waitQueued(t, "gpu-3", gpuRes)

	// The whole-GPU quota is full; MIG devices are charged on their own.
	for _, j := range []string{"mig-1", "mig-2", "mig-3"} {
		applyYAML(t, kueueJob(j, migTmpl))
	}
	for _, j := range []string{"mig-1", "mig-2", "mig-3"} {
		p := waitAdmittedRunning(t, j, mig)
		_, parent, migs := gpuOfIn(t, kueueNS, p, "")
		if len(migs) != 1 || !strings.HasPrefix(migs[0], "1g.10gb=") || seen[migs[0]] != "" {
			t.Fatalf("Job %s sees MIG devices %v on %s; want one 1g.10gb of its own (seen: %v)", j, migs, parent, seen)
		}
		seen[migs[0]] = j
	}
	if got, want := reserved(t), map[string]int64{gpuRes: 2, migRes: 3}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ClusterQueue %s reserves %v, want %v", kueueCQ, got, want)
	}
	applyYAML(t, kueueJob("mig-4", migTmpl))
	waitQueued(t, "mig-4", migRes)
	if c := workloadOf(t, "gpu-3").condition("QuotaReserved"); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("gpu-3 got quota with 2 whole-GPU Jobs running: %+v", c)
	}
	t.Logf("5 Jobs running, 2 queued at %.1fs", time.Since(start).Seconds())

	// One of each finishes: the queued Jobs get its quota and run.
	finishJob(t, "gpu-1")
	p := waitAdmittedRunning(t, "gpu-3", gpu)
	if _, uuid, migs := gpuOfIn(t, kueueNS, p, ""); len(migs) != 0 || uuid == "" {
		t.Errorf("gpu-3 sees GPU %q and MIG devices %v; want a whole GPU", uuid, migs)
	}
	finishJob(t, "mig-1")
	p = waitAdmittedRunning(t, "mig-4", mig)
	if _, _, migs := gpuOfIn(t, kueueNS, p, ""); len(migs) != 1 || !strings.HasPrefix(migs[0], "1g.10gb=") {
		t.Errorf("mig-4 sees MIG devices %v; want one 1g.10gb", migs)
	}

	for _, j := range []string{"gpu-2", "gpu-3", "mig-2", "mig-3", "mig-4"} {
		finishJob(t, j)
	}
	waitFor(t, "ClusterQueue "+kueueCQ+" free", 30*time.Second, func() (bool, string) {
		r := reserved(t)
		return r[gpuRes] == 0 && r[migRes] == 0, fmt.Sprint(r)
	})
	waitNodeClean(t, "after the Kueue Jobs", nil)
	t.Logf("all 7 Jobs done at %.1fs", time.Since(start).Seconds())
}
