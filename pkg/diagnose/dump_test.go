// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
)

const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// dumpSnapshot holds secrets where users put them: env values of the pod
// under diagnosis and of the plugin's DaemonSet, kubectl's last-applied
// annotation (which repeats them) on the pod and on a claim.
func dumpSnapshot() *clusterview.Snapshot {
	secretEnv := []corev1.EnvVar{
		{Name: "API_TOKEN", Value: "hunter2-env"},
		{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "db-secret"}, Key: "password"}}},
	}
	annotations := map[string]string{lastApplied: `{"env":[{"name":"API_TOKEN","value":"hunter2-annotation"}]}`}
	pluginSpec := corev1.PodSpec{NodeName: "vm", Containers: []corev1.Container{{Name: "plugin",
		Env: []corev1.EnvVar{{Name: "SIMULATE_PROFILE", Value: "h100x8"}, {Name: "HTTPS_PROXY", Value: "http://user:hunter2-proxy@proxy"}}}}}
	return &clusterview.Snapshot{
		DriverName: "gpu.nvidia.com",
		Pods: []corev1.Pod{{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Annotations: annotations,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply"}}},
			Spec: corev1.PodSpec{NodeName: "vm",
				InitContainers: []corev1.Container{{Name: "init", Env: []corev1.EnvVar{{Name: "INIT_SECRET", Value: "hunter2-init"}}}},
				Containers:     []corev1.Container{{Name: "ctr", Env: secretEnv}}},
		}},
		Claims: []resourceapi.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "other", Annotations: annotations}}},
		Nodes:  []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "vm"}}},
		PluginPods: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "plugin-x", Namespace: "gpu-dra-driver"}, Spec: pluginSpec,
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}},
		PluginDaemonSets: []appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "plugin", Namespace: "gpu-dra-driver", Annotations: annotations},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: pluginSpec}}}},
	}
}

// TestWriteDumpLeavesOutSecretsAndIsPrivate: `gpudra diagnose --dump`
// writes a file users attach to bug reports. It holds no env value and no
// annotation value (names, keys and valueFrom references stay), says so
// in its header, is mode 0600 even where a world-readable file was there
// before, does not write through a symbolic link, and still reads back
// (--from) into a snapshot that diagnoses as the original does.
func TestWriteDumpLeavesOutSecretsAndIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.yaml")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := dumpSnapshot()
	if err := WriteDump(path, s); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("dump mode %v, want 0600", st.Mode().Perm())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	if strings.Contains(text, "hunter2") {
		t.Errorf("the dump holds a secret value:\n%s", text)
	}
	for _, want := range []string{"API_TOKEN", "INIT_SECRET", "DB_PASSWORD", "db-secret", lastApplied, Omitted, "h100x8"} {
		if !strings.Contains(text, want) {
			t.Errorf("the dump lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "kubectl-client-side-apply") {
		t.Errorf("the dump holds managedFields")
	}
	if !strings.HasPrefix(text, "#") || !strings.Contains(text, "# Left out:") || !strings.Contains(text, "environment variables") || !strings.Contains(text, "annotations") {
		t.Errorf("no header saying what was left out:\n%s", text[:min(len(text), 600)])
	}
	// The caller's snapshot is unchanged.
	if s.Pods[0].Spec.Containers[0].Env[0].Value != "hunter2-env" || !strings.Contains(s.Pods[0].Annotations[lastApplied], "hunter2") {
		t.Errorf("WriteDump changed the snapshot it was given")
	}
	// --from reads it back, and the diagnosis still sees the simulated
	// profile, the one plugin value it reads.
	back := &clusterview.Snapshot{}
	if err := yaml.UnmarshalStrict(raw, back); err != nil {
		t.Fatalf("--from cannot read the dump: %v", err)
	}
	if got, want := DiagnoseNode(back, "vm").Node.Simulated, DiagnoseNode(s, "vm").Node.Simulated; got != want || got != "h100x8" {
		t.Errorf("simulated profile from the dump %q, from the cluster %q", got, want)
	}

	// A symbolic link at the path is replaced, not followed.
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteDump(link, s); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep\n" {
		t.Errorf("WriteDump wrote through a symbolic link: %q", b)
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != 0o600 {
		t.Errorf("dump at a former link: %v, %v", st.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %q", left)
	}
}
