// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// KrewManifest is a krew plugin manifest (krew.googlecontainertools.github.com/v1alpha2
// Plugin), the file `kubectl krew install --manifest=` and the krew index read.
type KrewManifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec KrewSpec `json:"spec"`
}

// KrewSpec is the manifest's spec.
type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one platform's archive: where it is, its SHA-256, and
// which of its files is the plugin.
type KrewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string   `json:"uri"`
	Sha256 string   `json:"sha256"`
	Bin    string   `json:"bin"`
	Files  []FileOp `json:"files"`
}

// FileOp copies an archive's file into the plugin's directory.
type FileOp struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Homepage is the project's, in the manifest and in the archives' URLs.
const Homepage = "https://github.com/gpu-dra-driver/gpu-dra-driver"

// DefaultBaseURL is where a release's files are downloaded from: the
// release's page of the project (hack/release.sh's RELEASE_URL overrides).
func DefaultBaseURL(version string) string { return Homepage + "/releases/download/" + version }

// NewKrewManifest is the manifest of version's archives in dir (named by
// Platform.ArchiveName), each with its SHA-256, downloaded from baseURL.
func NewKrewManifest(dir, version, baseURL string) (*KrewManifest, error) {
	if !strings.HasPrefix(version, "v") {
		return nil, fmt.Errorf("version %q: krew wants a semantic version with a leading v, e.g. v0.2.0", version)
	}
	m := &KrewManifest{APIVersion: "krew.googlecontainertools.github.com/v1alpha2", Kind: "Plugin"}
	m.Metadata.Name = "gpu"
	m.Spec = KrewSpec{
		Version:          version,
		Homepage:         Homepage,
		ShortDescription: "GPU usage, capacity and diagnosis of the NVIDIA GPU DRA driver",
		Description: `kubectl gpu reads the ResourceSlices and ResourceClaims of the GPU DRA driver
(gpu.nvidia.com): "kubectl gpu usage" shows every GPU, free, whole, MIG or
shared, and who holds it; "kubectl gpu capacity" how many more claims of a
kind fit; "kubectl gpu diagnose" why a pod is Pending or a node shows no
GPU; "kubectl gpu version" which driver version the cluster runs.`,
	}
	for _, p := range Platforms {
		name := p.ArchiveName(version)
		sum, err := SHA256File(filepath.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("krew manifest: archive of %s/%s: %w", p.OS, p.Arch, err)
		}
		kp := KrewPlatform{URI: strings.TrimSuffix(baseURL, "/") + "/" + name, Sha256: sum, Bin: p.Bin(),
			Files: []FileOp{{From: p.Bin(), To: "."}, {From: "LICENSE", To: "."}}}
		kp.Selector.MatchLabels = map[string]string{"os": p.OS, "arch": p.Arch}
		m.Spec.Platforms = append(m.Spec.Platforms, kp)
	}
	return m, nil
}

// WriteKrewManifest writes m as YAML to path.
func WriteKrewManifest(path string, m *KrewManifest) error {
	data, err := yaml.Marshal(m)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// VerifyDist checks a release directory: every platform of Platforms has
// one entry in dir/plugin.yaml, whose URI names an archive in dir, whose
// SHA-256 is the archive's and the one SHA256SUMS lists, and which holds
// the entry's bin and LICENSE. It returns every mismatch, not the first.
func VerifyDist(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "plugin.yaml"))
	if err != nil {
		return err
	}
	var m KrewManifest
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return fmt.Errorf("plugin.yaml: %w", err)
	}
	sums, err := ReadSHA256Sums(dir)
	if err != nil {
		return err
	}
	var problems []string
	seen := map[Platform]bool{}
	for _, kp := range m.Spec.Platforms {
		p := Platform{OS: kp.Selector.MatchLabels["os"], Arch: kp.Selector.MatchLabels["arch"]}
		if seen[p] {
			problems = append(problems, fmt.Sprintf("%s/%s is listed twice", p.OS, p.Arch))
		}
		seen[p] = true
		name := path.Base(kp.URI)
		if want := p.ArchiveName(m.Spec.Version); name != want {
			problems = append(problems, fmt.Sprintf("%s/%s: uri %s names %s, want %s", p.OS, p.Arch, kp.URI, name, want))
		}
		sum, err := SHA256File(filepath.Join(dir, name))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s/%s: %v", p.OS, p.Arch, err))
			continue
		}
		if kp.Sha256 != sum {
			problems = append(problems, fmt.Sprintf("%s/%s: plugin.yaml says sha256 %s, %s has %s", p.OS, p.Arch, kp.Sha256, name, sum))
		}
		if sums[name] != sum {
			problems = append(problems, fmt.Sprintf("%s/%s: SHA256SUMS says %q for %s, which has %s", p.OS, p.Arch, sums[name], name, sum))
		}
		names, err := ArchiveNames(filepath.Join(dir, name))
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, f := range []string{kp.Bin, "LICENSE"} {
			if !slices.Contains(names, f) {
				problems = append(problems, fmt.Sprintf("%s lacks %s (has %v)", name, f, names))
			}
		}
	}
	for _, p := range Platforms {
		if !seen[p] {
			problems = append(problems, fmt.Sprintf("plugin.yaml has no platform %s/%s", p.OS, p.Arch))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: %s", dir, strings.Join(problems, "; "))
	}
	return nil
}
