// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// A documented values example that values.schema.json refuses sends
// readers into an error at install time. Each one found in the README and in
// values.yaml's comments must render (helm template checks the schema).

// setFlag matches `--set key=value` and `--set-string key=value` in prose
// and shell blocks; quotes around the pair are allowed.
var setFlag = regexp.MustCompile(`--set(?:-string)?[ =]'?([A-Za-z][\w.\[\]-]*=[^\s'` + "`" + `\\]+)`)

// placeholder is a README placeholder such as <tag>.
var placeholder = regexp.MustCompile(`<[^>]+>`)

type example struct {
	where string
	set   string // one --set pair, or
	yaml  string // a values file
}

func documentedExamples(t *testing.T) []example {
	t.Helper()
	var out []example
	// The README and the docs pages it links (install, security, ...).
	docs := map[string]string{"README.md": read(t, "../../README.md")}
	pages, _ := filepath.Glob("../../docs/*.md")
	for _, p := range pages {
		docs["docs/"+filepath.Base(p)] = read(t, p)
	}
	values := read(t, filepath.Join(chartDir, "values.yaml"))
	texts := map[string]string{"values.yaml": values}
	for name, text := range docs {
		texts[name] = text
	}
	for name, text := range texts {
		for _, m := range setFlag.FindAllStringSubmatch(placeholder.ReplaceAllString(text, "example"), -1) {
			out = append(out, example{where: name + ": --set " + m[1], set: m[1]})
		}
	}
	top := topLevelKeys(t, values)
	for name, text := range docs {
		for i, block := range yamlBlocks(text) {
			var doc map[string]any
			if yaml.Unmarshal([]byte(block), &doc) != nil || len(doc) == 0 {
				continue
			}
			isValues := true
			for k := range doc {
				isValues = isValues && top[k]
			}
			if isValues {
				out = append(out, example{where: fmt.Sprintf("%s yaml block %d", name, i+1), yaml: block})
			}
		}
	}
	for _, ex := range commentedExamples(values) {
		out = append(out, example{where: "values.yaml comment: " + strings.TrimSpace(ex), yaml: ex})
	}
	// The values files in docs/examples (those whose keys are all this
	// chart's: the GPU Operator's and Kueue's files are not).
	files, _ := filepath.Glob("../../docs/examples/*.yaml")
	for _, f := range files {
		var doc map[string]any
		text := read(t, f)
		if yaml.Unmarshal([]byte(text), &doc) != nil || len(doc) == 0 {
			continue
		}
		isValues := true
		for k := range doc {
			isValues = isValues && top[k]
		}
		if isValues {
			out = append(out, example{where: "docs/examples/" + filepath.Base(f), yaml: text})
		}
	}
	return out
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func topLevelKeys(t *testing.T, values string) map[string]bool {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(values), &doc); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for k := range doc {
		keys[k] = true
	}
	return keys
}

// yamlBlocks returns the bodies of the ```yaml fences in a Markdown text.
func yamlBlocks(md string) []string {
	var out []string
	for _, part := range strings.Split(md, "```yaml\n")[1:] {
		if end := strings.Index(part, "```"); end >= 0 {
			out = append(out, part[:end])
		}
	}
	return out
}

// commentedExamples turns the indented examples in values.yaml's comments
// ("#   driverRoot: /run/nvidia/driver") into values files, nested under the
// keys the comment sits in.
func commentedExamples(values string) []string {
	example := regexp.MustCompile(`^( *)#   +([A-Za-z]\w*: .+)$`)
	key := regexp.MustCompile(`^( *)([A-Za-z]\w*):`)
	var parents []string // parents[i]: the key at indent 2*i
	var out []string
	for _, line := range strings.Split(values, "\n") {
		if m := example.FindStringSubmatch(line); m != nil {
			depth := len(m[1]) / 2
			var b strings.Builder
			for i := 0; i < depth && i < len(parents); i++ {
				b.WriteString(strings.Repeat("  ", i) + parents[i] + ":\n")
			}
			b.WriteString(strings.Repeat("  ", depth) + m[2] + "\n")
			out = append(out, b.String())
			continue
		}
		if m := key.FindStringSubmatch(line); m != nil {
			depth := len(m[1]) / 2
			parents = append(parents[:min(depth, len(parents))], m[2])
		}
	}
	return out
}

func TestChartDocumentedValuesExamplesPassTheSchema(t *testing.T) {
	examples := documentedExamples(t)
	// The README's install command, the GPU Operator's driverRoot, the
	// Security section's values; fewer means the extraction broke.
	if len(examples) < 6 {
		t.Fatalf("found only %d documented values examples: %+v", len(examples), examples)
	}
	helm := helmBinary(t)
	for _, ex := range examples {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2"}
		if ex.set != "" {
			args = append(args, "--set", ex.set)
		} else {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(ex.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-f", f)
		}
		if out, err := exec.Command(helm, args...).CombinedOutput(); err != nil {
			t.Errorf("%s: the chart refuses it: %v\n%.600s", ex.where, err, out)
		}
	}
}

// The schema refuses the security settings' bad values with helm's error
// naming the field.
func TestChartSchemaRejectsBadSecurityValues(t *testing.T) {
	for set, field := range map[string]string{
		"kubeletPlugin.capabilities={sys_admin}":           "capabilities",
		"kubeletPlugin.nvidiaVisibleDevices=":              "nvidiaVisibleDevices",
		"kubeletPlugin.privileged=yes":                     "privileged",
		"kubeletPlugin.capabilities={NET_ADMIN,NET_ADMIN}": "capabilities",
	} {
		args := []string{"template", "x", chartDir, "--kube-version", "v1.37.2", "--set", set}
		out, err := exec.Command(helmBinary(t), args...).CombinedOutput()
		if err == nil {
			t.Errorf("--set %s rendered", set)
		} else if !strings.Contains(string(out), field) {
			t.Errorf("--set %s: error does not name %s:\n%.400s", set, field, out)
		}
	}
}
