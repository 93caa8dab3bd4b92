// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/release"
)

const (
	upgradeNS = "gpu-upgrade"
	// oldCommit is the main branch before the checkpoint format changed
	// (v2: records carry the boot ID), and before dynamic MIG devices were
	// named with their GPU instance profile ID. The upgrade test upgrades
	// from it while CHANGELOG.md names no previous release.
	oldCommit = "1b7ce73"
)

// oldRelease is the driver the upgrade test upgrades from and rolls back
// to.
type oldRelease struct {
	name  string // v0.2.0, or oldCommit
	chart string // a chart directory or packaged chart
	tag   string // its image's tag (localhost/gpu-dra-driver:TAG), in containerd
	// legacy: it names dynamic MIG devices without the GPU instance
	// profile ID (oldCommit), so claims it allocated keep old names across
	// the upgrade, and after a rollback it does not know this checkout's.
	legacy bool
}

func (o oldRelease) image() string { return "localhost/gpu-dra-driver:" + o.tag }

// previousRelease is the release this checkout upgrades from: the entry
// of CHANGELOG.md that release.Changelog.Previous picks (the newest
// release while [Unreleased] lists changes, else the one before it), built
// by `make release` at the commit that entry names, in a worktree, once per
// version (releaseDist caches it), its image imported from the release's
// archive. While there is none (v0.2.0 is the first release) it is
// oldCommit, built as before: its chart from a worktree and its image by
// hack/cluster/images.sh, cached by commit. GPU_DRA_PREVIOUS_RELEASE=none
// forces that fallback.
func previousRelease(t *testing.T) oldRelease {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	log, err := release.ParseChangelog(data)
	if err != nil {
		t.Fatal(err)
	}
	prev := log.Previous()
	if prev == nil || os.Getenv("GPU_DRA_PREVIOUS_RELEASE") == "none" {
		worktree, image := oldDriver(t, oldCommit)
		t.Logf("CHANGELOG.md names no previous release: upgrading from commit %s", oldCommit)
		return oldRelease{name: oldCommit, chart: filepath.Join(worktree, "deployments", "helm", "gpu-dra-driver"),
			tag: strings.TrimPrefix(image, "localhost/gpu-dra-driver:"), legacy: true}
	}
	version := "v" + prev.Version
	worktree := filepath.Join(t.TempDir(), "release-"+version)
	git(t, "worktree", "add", "--detach", worktree, prev.Commit)
	t.Cleanup(func() { git(t, "worktree", "remove", "--force", worktree) })
	dist := releaseDist(t, version, prev.Commit, worktree)
	importImage(t, filepath.Join(dist, "gpu-dra-driver_"+version+"_image.oci.tar"))
	t.Logf("upgrading from the previous release %s (commit %s, %s)", version, prev.Commit, dist)
	return oldRelease{name: version, chart: filepath.Join(dist, "gpu-dra-driver-"+prev.Version+".tgz"), tag: prev.Version}
}

// deployCurrent installs this checkout's chart and image as `make e2e`
// does (hack/cluster/deploy.sh), with a simulated profile.
func deployCurrent(t *testing.T, profile string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "deploy.sh"), profile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/cluster/deploy.sh %s: %v\n%s", profile, err, out)
	}
	t.Logf("deploy.sh %s took %.1fs:\n%s", profile, time.Since(start).Seconds(), strings.TrimSpace(string(out)))
}

// waitPluginImage waits for the one plugin pod to run image, Ready.
func waitPluginImage(t *testing.T, image string) {
	t.Helper()
	waitPluginReady(t, "a ready plugin pod of "+image, func(p corev1.Pod) bool {
		return p.Spec.Containers[0].Image == image
	})
	completePool(t)
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = repoRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// oldDriver checks out commit in a worktree (removed at the end of the
// test) and makes sure its driver image is in containerd, built once per
// commit and kept as a tarball in the cluster cache. It returns the
// worktree and the image.
func oldDriver(t *testing.T, commit string) (worktree, image string) {
	t.Helper()
	cmd := exec.Command("git", "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil && git(t, "rev-parse", "--is-shallow-repository") == "true" {
		t.Skipf("this shallow clone lacks commit %s, whose chart and image the test installs; run it from a full clone", commit)
	}
	if err != nil {
		t.Fatalf("this clone lacks commit %s (main before the checkpoint format v2), which the upgrade test installs; fetch it (git fetch origin main) or run from a full clone: %v", commit, err)
	}
	sha := strings.TrimSpace(string(out))
	worktree = filepath.Join(t.TempDir(), "old-"+sha[:12])
	git(t, "worktree", "add", "--detach", worktree, sha)
	t.Cleanup(func() {
		c := exec.Command("git", "worktree", "remove", "--force", worktree)
		c.Dir = repoRoot
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("git worktree remove %s: %v\n%s", worktree, err, out)
		}
	})
	tag := "commit-" + sha[:12]
	image = "localhost/gpu-dra-driver:" + tag
	if imgs, err := exec.Command("ctr", "-n", "k8s.io", "images", "ls", "-q").CombinedOutput(); err == nil && slices.Contains(strings.Fields(string(imgs)), image) {
		t.Logf("driver image of %s: %s, already in containerd", commit, image)
		return worktree, image
	}
	tarball := filepath.Join(cacheDir(), "images", "driver-"+sha+".oci.tar")
	if _, err := os.Stat(tarball); err != nil {
		start := time.Now()
		build := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "images.sh"), "driver", worktree, tag)
		out, err := build.CombinedOutput()
		if err != nil {
			t.Fatalf("building the driver image of %s: %v\n%s", commit, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err := copyFile(lines[len(lines)-1], tarball); err != nil {
			t.Fatal(err)
		}
		t.Logf("built the driver image of %s in %.1fs, cached as %s", commit, time.Since(start).Seconds(), tarball)
	}
	if out, err := exec.Command("ctr", "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", tarball).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", tarball, err, out)
	}
	return worktree, image
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := to + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, to)
}

// recordVersions maps each claim record's claim UID to its format version,
// and lists the files moved aside as damaged.
func recordVersions(t *testing.T) (versions map[string]string, corrupt []string) {
	t.Helper()
	versions = map[string]string{}
	for _, f := range checkpointRecords() {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rec struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		versions[strings.TrimSuffix(filepath.Base(f), ".json")] = rec.Version
	}
	corrupt, _ = filepath.Glob(filepath.Join(stateDir(), "checkpoint", "*.corrupt-*"))
	return versions, corrupt
}

// complaint is a plugin log line about its state: a klog error, or
// anything about damaged, unreadable or foreign records.
var complaint = regexp.MustCompile(`^E\d{4} |(?i)corrupt|moved .*aside|unsupported version|checksum|newer driver|cannot be restored`)
