// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package fleetview

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
)

// PodShape is the pod that `capacity --for` and `capacity -f` count
// copies of: a workload's pod template, or a pod manifest.
type PodShape struct {
	// From says where the shape came from: "deployment default/web",
	// "pod ml/trainer (file pod.yaml)".
	From string     `json:"from"`
	Pod  corev1.Pod `json:"-"`
}

// ShapeFromObject takes the pod template of a Deployment, StatefulSet,
// ReplicaSet or Job, or a Pod itself. namespace stands in where the
// object names none.
func ShapeFromObject(obj runtime.Object, namespace string) (*PodShape, error) {
	var meta metav1.ObjectMeta
	var spec corev1.PodSpec
	var podMeta metav1.ObjectMeta
	kind := ""
	switch o := obj.(type) {
	case *appsv1.Deployment:
		kind, meta, podMeta, spec = "deployment", o.ObjectMeta, o.Spec.Template.ObjectMeta, o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		kind, meta, podMeta, spec = "statefulset", o.ObjectMeta, o.Spec.Template.ObjectMeta, o.Spec.Template.Spec
	case *appsv1.ReplicaSet:
		kind, meta, podMeta, spec = "replicaset", o.ObjectMeta, o.Spec.Template.ObjectMeta, o.Spec.Template.Spec
	case *batchv1.Job:
		kind, meta, podMeta, spec = "job", o.ObjectMeta, o.Spec.Template.ObjectMeta, o.Spec.Template.Spec
	case *corev1.Pod:
		kind, meta, podMeta, spec = "pod", o.ObjectMeta, o.ObjectMeta, o.Spec
	default:
		return nil, fmt.Errorf("a %T has no pod template: give a Pod, Deployment, StatefulSet, ReplicaSet or Job", obj)
	}
	ns := meta.Namespace
	if ns == "" {
		ns = namespace
	}
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: meta.Name, Namespace: ns, Labels: podMeta.Labels}, Spec: *spec.DeepCopy()}
	// A copy not yet scheduled: where the manifest pins a node
	// (spec.nodeName), the scheduler is not asked.
	pod.Spec.NodeName = ""
	if pod.Name == "" {
		pod.Name = "capacity-probe"
	}
	return &PodShape{From: kind + " " + ns + "/" + meta.Name, Pod: pod}, nil
}

// ReadShapeFile reads a pod shape from a YAML or JSON manifest (-f FILE;
// "-" is standard input). A file of several documents is refused: which
// one to count would be a guess.
func ReadShapeFile(path, namespace string) (*PodShape, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	if docs := splitYAMLDocs(string(data)); len(docs) > 1 {
		return nil, fmt.Errorf("-f %s: %d objects in the file; give a file with one Pod, Deployment, StatefulSet, ReplicaSet or Job", path, len(docs))
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w (expected one Pod, Deployment, StatefulSet, ReplicaSet or Job with apiVersion and kind)", path, err)
	}
	shape, err := ShapeFromObject(obj, namespace)
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	shape.From += " (file " + path + ")"
	return shape, nil
}

// GetShape reads the workload that --for names: KIND/NAME with KIND one of
// deployment, statefulset, replicaset, job or pod (kubectl's short names
// deploy, sts, rs and po too), in namespace.
func GetShape(ctx context.Context, cs kubernetes.Interface, namespace, ref string) (*PodShape, error) {
	kind, name, ok := strings.Cut(ref, "/")
	if !ok || name == "" {
		return nil, fmt.Errorf("--for %q: expected KIND/NAME, e.g. deployment/web (kinds: deployment, statefulset, replicaset, job, pod)", ref)
	}
	get := metav1.GetOptions{}
	var obj runtime.Object
	var err error
	switch strings.ToLower(kind) {
	case "deployment", "deployments", "deploy", "deployment.apps":
		obj, err = cs.AppsV1().Deployments(namespace).Get(ctx, name, get)
	case "statefulset", "statefulsets", "sts", "statefulset.apps":
		obj, err = cs.AppsV1().StatefulSets(namespace).Get(ctx, name, get)
	case "replicaset", "replicasets", "rs", "replicaset.apps":
		obj, err = cs.AppsV1().ReplicaSets(namespace).Get(ctx, name, get)
	case "job", "jobs", "job.batch":
		obj, err = cs.BatchV1().Jobs(namespace).Get(ctx, name, get)
	case "pod", "pods", "po":
		obj, err = cs.CoreV1().Pods(namespace).Get(ctx, name, get)
	default:
		return nil, fmt.Errorf("--for %s: kind %q has no pod template here; use deployment, statefulset, replicaset, job or pod, or -f FILE", ref, kind)
	}
	if err != nil {
		return nil, fmt.Errorf("--for %s in namespace %s: %w", ref, namespace, err)
	}
	return ShapeFromObject(obj, namespace)
}

// splitYAMLDocs returns the non-empty documents of a YAML stream.
func splitYAMLDocs(s string) []string {
	var out []string
	for _, d := range strings.Split("\n"+s, "\n---") {
		rest := d
		if i := strings.IndexByte(rest, '\n'); i >= 0 && strings.TrimSpace(rest[:i]) == "" {
			rest = rest[i+1:]
		}
		keep := false
		for _, line := range strings.Split(rest, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				keep = true
				break
			}
		}
		if keep {
			out = append(out, d)
		}
	}
	return out
}
