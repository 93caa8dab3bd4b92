// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The values docs/install.md documents for running beside the NVIDIA GPU
// Operator: the operator's, and this chart's.
const (
	operatorValuesFile = "../../docs/examples/gpu-operator-values.yaml"
	besideValuesFile   = "../../docs/examples/gpu-dra-driver-with-gpu-operator.yaml"
	operatorNamespace  = "gpu-operator"
)

// operatorDir is the GPU Operator's module directory: GDRA_GPU_OPERATOR_DIR
// (make test sets it, so a failed fetch fails there), else what
// hack/gpu-operator-chart.sh fetches from the Go module proxy, else the
// test skips.
func operatorDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("GDRA_GPU_OPERATOR_DIR"); dir != "" {
		return dir
	}
	out, err := exec.Command("../../hack/gpu-operator-chart.sh").Output()
	if err != nil {
		t.Skipf("GPU Operator chart not available (hack/gpu-operator-chart.sh: %v); make test fetches it", err)
	}
	return strings.TrimSpace(string(out))
}

// object is one rendered manifest, kept as generic YAML.
type object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	raw  []byte
	tree map[string]any
}

func (o object) id() string { return o.Kind + " " + o.Metadata.Namespace + "/" + o.Metadata.Name }

func helmObjects(t *testing.T, args ...string) []object {
	t.Helper()
	cmd := exec.Command(helmBinary(t), append([]string{"template"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var objs []object
	for _, doc := range strings.Split(string(out), "\n---") {
		var o object
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
		if o.Kind == "" {
			continue
		}
		if err := yaml.Unmarshal([]byte(doc), &o.tree); err != nil {
			t.Fatal(err)
		}
		o.raw = []byte(doc)
		objs = append(objs, o)
	}
	return objs
}

// lookup walks a YAML tree along dotted keys.
func lookup(tree map[string]any, path string) (any, bool) {
	var cur any = tree
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func renderBeside(t *testing.T) (operator, ours []object, dir string) {
	t.Helper()
	dir = operatorDir(t)
	operator = helmObjects(t, "gpu-operator", filepath.Join(dir, "deployments", "gpu-operator"),
		"--namespace", operatorNamespace, "--kube-version", "v1.37.2", "-f", operatorValuesFile)
	ours = helmObjects(t, "gpu-dra-driver", chartDir,
		"--namespace", "gpu-dra-driver", "--kube-version", "v1.37.2", "-f", besideValuesFile)
	return operator, ours, dir
}

func clusterPolicy(t *testing.T, objs []object) map[string]any {
	t.Helper()
	for _, o := range objs {
		if o.Kind == "ClusterPolicy" {
			spec, _ := o.tree["spec"].(map[string]any)
			return spec
		}
	}
	t.Fatal("the GPU Operator chart rendered no ClusterPolicy")
	return nil
}

// The operator deploys its operands at run time from the ClusterPolicy
// (controllers/state_manager.go isStateEnabled: the device plugin and MIG
// manager states only when enabled; labelGPUNodes labels MIG-capable nodes
// nvidia.com/mig.config=all-disabled only with the MIG manager on), so the
// documented values must reach the rendered ClusterPolicy, under names its
// CRD knows (helm would drop a misspelt value silently).
func TestGPUOperatorValuesReachTheClusterPolicy(t *testing.T) {
	operator, _, dir := renderBeside(t)
	spec := clusterPolicy(t, operator)
	want := map[string]any{
		"devicePlugin.enabled": false,
		"migManager.enabled":   false,
		"driver.enabled":       true,
		"toolkit.enabled":      true,
		"cdi.enabled":          true,
		"dcgmExporter.enabled": true,
		// Its VFIO and vGPU managers would bind GPUs away from us.
		"sandboxWorkloads.enabled": false,
	}
	for path, v := range want {
		if got, ok := lookup(spec, path); !ok || got != v {
			t.Errorf("ClusterPolicy spec.%s = %v (set: %v), want %v", path, got, ok, v)
		}
	}
	args, _ := lookup(spec, "dcgmExporter.args")
	if l, _ := args.([]any); !slices.Contains(l, any("--kubernetes-enable-dra")) {
		t.Errorf("ClusterPolicy spec.dcgmExporter.args = %v, want --kubernetes-enable-dra", args)
	}
	env, _ := lookup(spec, "toolkit.env")
	if !hasEnv(env, "ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED", "false") {
		t.Errorf("ClusterPolicy spec.toolkit.env = %v, want ACCEPT_NVIDIA_VISIBLE_DEVICES_ENVVAR_WHEN_UNPRIVILEGED=false", env)
	}

	crdFile := filepath.Join(dir, "deployments", "gpu-operator", "crds", "nvidia.com_clusterpolicies.yaml")
	crdYAML, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(crdYAML, &crd); err != nil {
		t.Fatal(err)
	}
	versions, _ := lookup(crd, "spec.versions")
	v0, _ := versions.([]any)
	if len(v0) == 0 {
		t.Fatalf("%s: no versions", crdFile)
	}
	schema, _ := lookup(v0[0].(map[string]any), "schema.openAPIV3Schema")
	for _, path := range []string{"devicePlugin.enabled", "migManager.enabled", "driver.enabled", "toolkit.enabled",
		"toolkit.env", "cdi.enabled", "sandboxWorkloads.enabled", "dcgmExporter.enabled", "dcgmExporter.args", "hostPaths.driverInstallDir"} {
		if !schemaHas(schema, "spec."+path) {
			t.Errorf("the ClusterPolicy CRD has no spec.%s", path)
		}
	}

	// Nothing else in the operator's values enables a DRA driver of its
	// own (later operator versions deploy NVIDIA's, with DeviceClasses of
	// our names): any top-level values key naming DRA must be set off here.
	opValues, err := os.ReadFile(filepath.Join(dir, "deployments", "gpu-operator", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var defaults, ours map[string]any
	if err := yaml.Unmarshal(opValues, &defaults); err != nil {
		t.Fatal(err)
	}
	mustReadYAML(t, operatorValuesFile, &ours)
	for k := range defaults {
		if !strings.Contains(strings.ToLower(k), "dra") {
			continue
		}
		if on, _ := lookup(ours, k+".enabled"); on != false {
			t.Errorf("GPU Operator values key %s (a DRA driver?) is not set enabled: false in %s", k, operatorValuesFile)
		}
	}
}

// schemaHas: an OpenAPI schema has the dotted field path.
func schemaHas(schema any, path string) bool {
	for _, k := range strings.Split(path, ".") {
		m, ok := schema.(map[string]any)
		if !ok {
			return false
		}
		if schema, ok = lookup(m, "properties."+k); !ok {
			return false
		}
	}
	return true
}

func hasEnv(list any, name, value string) bool {
	l, _ := list.([]any)
	for _, e := range l {
		m, _ := e.(map[string]any)
		if m["name"] == name && m["value"] == value {
			return true
		}
	}
	return false
}

func mustReadYAML(t *testing.T, file string, into any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// Rendered together, the two charts create no object twice, no device
// plugin, MIG manager or DRA driver of NVIDIA's, and no DeviceClass but ours.
func TestGPUOperatorBesideCreatesNoSecondDriver(t *testing.T) {
	operator, ours, _ := renderBeside(t)
	seen := map[string]bool{}
	for _, o := range ours {
		seen[o.id()] = true
	}
	for _, o := range operator {
		if seen[o.id()] {
			t.Errorf("%s is rendered by both charts", o.id())
		}
		if o.Kind == "DeviceClass" || o.Kind == "ResourceSlice" {
			t.Errorf("the GPU Operator chart renders %s", o.id())
		}
		text := string(o.raw)
		for _, image := range []string{"k8s-device-plugin", "k8s-mig-manager", "k8s-dra-driver"} {
			if (o.Kind == "DaemonSet" || o.Kind == "Deployment") && strings.Contains(text, image) {
				t.Errorf("the GPU Operator chart renders %s with image %s", o.id(), image)
			}
		}
	}
	// The driver root is where the operator's driver container puts it.
	spec := clusterPolicy(t, operator)
	root, _ := lookup(spec, "hostPaths.driverInstallDir")
	var b struct {
		DriverRoot string `json:"driverRoot"`
	}
	mustReadYAML(t, besideValuesFile, &b)
	if root != b.DriverRoot {
		t.Errorf("ClusterPolicy hostPaths.driverInstallDir = %v, %s sets driverRoot %q", root, besideValuesFile, b.DriverRoot)
	}
}

// The exporter DaemonSet the operator deploys (its asset, transformed as
// controllers/object_controls.go TransformDCGMExporter does with
// spec.dcgmExporter.args: they replace the container's args on every
// platform, while spec.dcgmExporter.env is applied only on OpenShift in this
// operator version) runs in DRA mode, and its ServiceAccount is the one our
// optional ClusterRoleBinding lets list and watch ResourceSlices.
func TestGPUOperatorExporterGetsDRAModeAndRBAC(t *testing.T) {
	operator, ours, dir := renderBeside(t)
	asset, err := os.ReadFile(filepath.Join(dir, "assets", "state-dcgm-exporter", "0900_daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ds := &appsv1.DaemonSet{}
	if err := yaml.UnmarshalStrict(asset, ds); err != nil {
		t.Fatal(err)
	}
	spec := clusterPolicy(t, operator)
	if args, _ := lookup(spec, "dcgmExporter.args"); args != nil {
		ds.Spec.Template.Spec.Containers[0].Args = nil
		for _, a := range args.([]any) {
			ds.Spec.Template.Spec.Containers[0].Args = append(ds.Spec.Template.Spec.Containers[0].Args, a.(string))
		}
	}
	exporter := ds.Spec.Template.Spec.Containers[0]
	if !slices.Contains(exporter.Args, "--kubernetes-enable-dra") {
		t.Errorf("exporter container args %v lack --kubernetes-enable-dra", exporter.Args)
	}
	// The operator fills the asset's namespace with its own
	// (OPERATOR_NAMESPACE, the release namespace).
	sa := rbacv1.Subject{Kind: "ServiceAccount", Name: ds.Spec.Template.Spec.ServiceAccountName, Namespace: operatorNamespace}

	var role *rbacv1.ClusterRole
	var binding *rbacv1.ClusterRoleBinding
	for _, o := range ours {
		switch {
		case o.Kind == "ClusterRole" && strings.HasSuffix(o.Metadata.Name, "-dcgm-exporter"):
			role = &rbacv1.ClusterRole{}
			if err := yaml.UnmarshalStrict(o.raw, role); err != nil {
				t.Fatal(err)
			}
		case o.Kind == "ClusterRoleBinding" && strings.HasSuffix(o.Metadata.Name, "-dcgm-exporter"):
			binding = &rbacv1.ClusterRoleBinding{}
			if err := yaml.UnmarshalStrict(o.raw, binding); err != nil {
				t.Fatal(err)
			}
		}
	}
	if role == nil || binding == nil {
		t.Fatalf("%s renders no dcgm-exporter ClusterRole and ClusterRoleBinding", besideValuesFile)
	}
	if binding.RoleRef.Kind != "ClusterRole" || binding.RoleRef.Name != role.Name {
		t.Errorf("binding refers to %s %s, want ClusterRole %s", binding.RoleRef.Kind, binding.RoleRef.Name, role.Name)
	}
	if !slices.Contains(binding.Subjects, sa) {
		t.Errorf("binding subjects %+v lack the exporter's %+v", binding.Subjects, sa)
	}
	for _, need := range []struct{ group, resource, verb string }{
		{"resource.k8s.io", "resourceslices", "list"}, {"resource.k8s.io", "resourceslices", "watch"},
		{"", "pods", "list"}, {"", "pods", "watch"},
	} {
		if !allows(role.Rules, need.group, need.resource, need.verb) {
			t.Errorf("ClusterRole %s does not allow %s %s.%s", role.Name, need.verb, need.resource, need.group)
		}
	}

	// Off by default.
	for _, o := range helmObjects(t, "gpu-dra-driver", chartDir, "--kube-version", "v1.37.2") {
		if strings.HasSuffix(o.Metadata.Name, "-dcgm-exporter") {
			t.Errorf("default values render %s", o.id())
		}
	}
}

func allows(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}

// docs/install.md shows the values this test renders with, as they are.
func TestGPUOperatorDocShowsTheTestedValues(t *testing.T) {
	doc, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	const heading = "\n## Beside the NVIDIA GPU Operator\n"
	_, section, ok := strings.Cut(string(doc), heading)
	if !ok {
		t.Fatalf("docs/install.md has no section %q", strings.TrimSpace(heading))
	}
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(section, -1)
	files := []string{operatorValuesFile, besideValuesFile}
	if len(blocks) != len(files) {
		t.Fatalf("the section shows %d YAML blocks, want %d (%v)", len(blocks), len(files), files)
	}
	for i, file := range files {
		var shown, tested any
		if err := yaml.Unmarshal([]byte(blocks[i][1]), &shown); err != nil {
			t.Fatalf("docs/install.md YAML block %d: %v", i+1, err)
		}
		mustReadYAML(t, file, &tested)
		if !reflect.DeepEqual(shown, tested) {
			t.Errorf("docs/install.md YAML block %d differs from %s:\ndoc:  %v\nfile: %v", i+1, file, shown, tested)
		}
	}
}
