// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

// Omitted replaces what a dump leaves out: environment variable values
// and annotation values.
const Omitted = "(value omitted)"

// DumpLeftOut says what `gpudra diagnose --dump` leaves out, and DumpKept
// what it keeps that a reader should know of before sharing the file; both
// head the file and the CLI prints the first.
var (
	DumpLeftOut = []string{
		"the values of environment variables of pods and of the plugin's DaemonSet (names and valueFrom references kept; only the plugin's own SIMULATE_PROFILE and SIMULATE_NODE_MODE, which the diagnosis reads, keep theirs)",
		"the values of every object's annotations, kubectl's last-applied-configuration included (keys kept)",
		"every object's managedFields",
	}
	DumpKept = []string{
		"ResourceClaims of every namespace (names, requests, configs, allocations: which devices are free depends on every allocation, as it does for the scheduler)",
		"container images, commands and arguments, labels, events' messages, pod and node status",
	}
)

// pluginEnvKept are the plugin container's variables whose values the
// diagnosis reads (simulatedProfile); the chart sets them.
var pluginEnvKept = map[string]bool{"SIMULATE_PROFILE": true, "SIMULATE_NODE_MODE": true}

// ForDump returns a copy of s fit for a file that users attach to bug
// reports: DumpLeftOut is gone from it. s is not changed. Diagnosing the
// copy (--from) gives the same verdicts: none reads what it drops.
func ForDump(s *clusterview.Snapshot) *clusterview.Snapshot {
	out := *s
	out.Pods = copyPods(s.Pods, nil)
	out.PluginPods = copyPods(s.PluginPods, pluginEnvKept)
	out.PluginDaemonSets = nil
	for i := range s.PluginDaemonSets {
		ds := s.PluginDaemonSets[i].DeepCopy()
		redactMeta(&ds.ObjectMeta)
		redactMeta(&ds.Spec.Template.ObjectMeta)
		redactPodSpec(&ds.Spec.Template.Spec, pluginEnvKept)
		out.PluginDaemonSets = append(out.PluginDaemonSets, *ds)
	}
	out.Claims = redactedCopies(s.Claims)
	out.ClaimTemplates = redactedCopies(s.ClaimTemplates)
	for i := range out.ClaimTemplates {
		redactMeta(&out.ClaimTemplates[i].Spec.ObjectMeta)
	}
	out.DeviceClasses = redactedCopies(s.DeviceClasses)
	out.Slices = redactedCopies(s.Slices)
	out.Nodes = redactedCopies(s.Nodes)
	out.Events = redactedCopies(s.Events)
	return &out
}

// redactedCopies deep-copies API objects with their metadata redacted
// (redactMeta); in is not changed.
func redactedCopies[T any, P interface {
	*T
	DeepCopy() *T
	GetObjectMeta() metav1.Object
}](in []T) []T {
	if len(in) == 0 {
		return nil // as the dump always wrote an empty list
	}
	out := make([]T, 0, len(in))
	for i := range in {
		c := P(&in[i]).DeepCopy()
		redactMeta(P(c).GetObjectMeta().(*metav1.ObjectMeta))
		out = append(out, *c)
	}
	return out
}

func copyPods(pods []corev1.Pod, keep map[string]bool) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		p := pods[i].DeepCopy()
		redactMeta(&p.ObjectMeta)
		redactPodSpec(&p.Spec, keep)
		out = append(out, *p)
	}
	return out
}

func redactMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	for k := range m.Annotations {
		m.Annotations[k] = Omitted
	}
}

func redactPodSpec(spec *corev1.PodSpec, keep map[string]bool) {
	env := func(vars []corev1.EnvVar) {
		for i := range vars {
			if vars[i].Value != "" && !keep[vars[i].Name] {
				vars[i].Value = Omitted
			}
		}
	}
	for i := range spec.InitContainers {
		env(spec.InitContainers[i].Env)
	}
	for i := range spec.Containers {
		env(spec.Containers[i].Env)
	}
	for i := range spec.EphemeralContainers {
		env(spec.EphemeralContainers[i].Env)
	}
}

// DumpHeader is the comment that heads a dump.
func DumpHeader() string {
	var b strings.Builder
	b.WriteString("# The cluster state `gpudra diagnose --dump` read, for `--from` and bug reports.\n")
	b.WriteString("# Readable by its owner only. Read it before you share it.\n")
	b.WriteString("# Left out:\n")
	for _, s := range DumpLeftOut {
		b.WriteString("#   - " + s + "\n")
	}
	b.WriteString("# Kept:\n")
	for _, s := range DumpKept {
		b.WriteString("#   - " + s + "\n")
	}
	return b.String()
}

// WriteDump writes ForDump(s) as YAML, headed by DumpHeader, to path with
// mode 0600. It writes a new file and renames it over path, so an existing
// file, whatever its mode, is replaced rather than written through, and a
// symbolic link at path is replaced, not followed.
func WriteDump(path string, s *clusterview.Snapshot) error {
	data, err := yaml.Marshal(ForDump(s))
	if err != nil {
		return err
	}
	if st, err := os.Lstat(path); err == nil && st.IsDir() {
		return fmt.Errorf("--dump %s: is a directory", path)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("--dump: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	fail := func(err error) error {
		tmp.Close()
		return fmt.Errorf("--dump %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := tmp.WriteString(DumpHeader()); err != nil {
		return fail(err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--dump %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("--dump %s: %w", path, err)
	}
	return nil
}
