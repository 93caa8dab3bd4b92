// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/release"
)

// A release installed as a user installs it: from make release's files only.

const (
	releaseNS    = "gpu-release"
	krewVersion  = "v0.4.3"
	releaseChart = "gdra-release/gpu-dra-driver"
)

// releaseDist is the dist/ of `make release` for this checkout's version
// (the chart's appVersion): GPU_DRA_DIST when set (CI builds it once), else
// built into the cache, keyed by commit and uncommitted changes.
func releaseDist(t *testing.T, version, commitish, repo string) string {
	t.Helper()
	if d := os.Getenv("GPU_DRA_DIST"); d != "" && commitish == "HEAD" {
		return d
	}
	repo, err := filepath.Abs(repo) // git runs in repoRoot (git), -C repo from there
	if err != nil {
		t.Fatal(err)
	}
	key := git(t, "-C", repo, "rev-parse", commitish)[:12]
	if diff, err := exec.Command("git", "-C", repo, "diff", commitish).Output(); err == nil && len(diff) > 0 {
		sum := sha256.Sum256(diff)
		key += "-" + hex.EncodeToString(sum[:4])
	}
	dist := filepath.Join(cacheDir(), "releases", version+"-"+key)
	if commitish == "HEAD" {
		// One checkout's release at a time (each is ~230 MB): the
		// previous releases, by version and commit, stay.
		dist = filepath.Join(cacheDir(), "releases", "checkout-"+version+"-"+key)
	}
	if _, err := os.Stat(filepath.Join(dist, "SHA256SUMS")); err == nil {
		return dist
	}
	if commitish == "HEAD" {
		old, _ := filepath.Glob(filepath.Join(cacheDir(), "releases", "checkout-*"))
		for _, d := range old {
			os.RemoveAll(d)
		}
	}
	start := time.Now()
	cmd := exec.Command("make", "release", "VERSION="+version, "DIST="+dist)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dist)
		t.Fatalf("make release VERSION=%s in %s: %v\n%s", version, repo, err, out)
	}
	t.Logf("make release VERSION=%s (%s) took %.0fs, cached in %s", version, commitish, time.Since(start).Seconds(), dist)
	return dist
}

// serveRelease serves dist over HTTP on the loopback, as a release page or
// a mirror would, and adds it as a Helm repository in a Helm configuration
// of the test's own (HELM_* variables, which deploy.sh's helm inherits).
func serveRelease(t *testing.T, dist string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dist)), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	helmHome := t.TempDir()
	for k, v := range map[string]string{"HELM_CONFIG_HOME": "config", "HELM_CACHE_HOME": "cache", "HELM_DATA_HOME": "data"} {
		t.Setenv(k, filepath.Join(helmHome, v))
	}
	if out, err := exec.Command("helm", "repo", "add", "gdra-release", "http://"+ln.Addr().String()).CombinedOutput(); err != nil {
		t.Fatalf("helm repo add: %v\n%s", err, out)
	}
}

// importImage imports a release's image archive into the node's containerd
// (the amd64 manifest of its index), as deploy.sh imports a local build.
func importImage(t *testing.T, archive string) {
	t.Helper()
	if out, err := exec.Command("ctr", "-n", "k8s.io", "images", "import", "--platform", "linux/amd64", archive).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import %s: %v\n%s", archive, err, out)
	}
}

// deployChart installs (or upgrades to) chart with deploy.sh's settings and
// the image tag given, and waits for its plugin pod to run image.
func deployChart(t *testing.T, chart, tag, profile string) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "cluster", "deploy.sh"), profile)
	cmd.Env = append(os.Environ(), "CHART="+chart, "IMAGE_TAG="+tag)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deploy.sh with chart %s: %v\n%s", chart, err, out)
	}
	waitPluginImage(t, "localhost/gpu-dra-driver:"+tag)
	t.Logf("chart %s with image tag %s deployed and Ready in %.1fs", chart, tag, time.Since(start).Seconds())
}

// krew builds krew (once per version, cached) and returns the directory
// to put first on PATH: kubectl-krew, so that `kubectl krew` finds it.
func krew(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(cacheDir(), "bin", "krew-"+krewVersion)
	if _, err := os.Stat(filepath.Join(dir, "kubectl-krew")); err == nil {
		return dir
	}
	start := time.Now()
	cmd := exec.Command("go", "install", "-trimpath", "-ldflags", "-s -w", "sigs.k8s.io/krew/cmd/krew@"+krewVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install krew %s: %v\n%s", krewVersion, err, out)
	}
	if err := os.Rename(filepath.Join(dir, "krew"), filepath.Join(dir, "kubectl-krew")); err != nil {
		t.Fatal(err)
	}
	t.Logf("built krew %s in %.0fs", krewVersion, time.Since(start).Seconds())
	return dir
}

// kubectlWith runs kubectl with env added (PATH, KREW_ROOT) and returns
// its output and error.
func kubectlWith(env []string, args ...string) (string, error) {
	cmd := exec.Command("kubectl", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestInstallFromRelease installs the release `make release` wrote, from
// its files only, as a user does: the chart from its Helm repository
// served over HTTP (helm repo add, helm upgrade --install), its default
// image tag (the appVersion) from the image archive imported into
// containerd; a pod gets a GPU; the kubectl plugin installed by krew from
// the krew manifest and the archive (one tampered byte: krew refuses it)
// shows that pod (`kubectl gpu usage`) and the driver's version (`kubectl
// gpu version`). The cluster's chart is this checkout's again at the end.
func TestInstallFromRelease(t *testing.T) {
	requireCleanNode(t)
	const profile = "h100x8"
	chart, err := release.ReadChart(filepath.Join(repoRoot, "deployments", "helm", "gpu-dra-driver", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	version := "v" + chart.AppVersion
	dist := releaseDist(t, version, "HEAD", repoRoot)
	// From here on, only dist's files.
	if err := release.VerifyDist(dist); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deployCurrent(t, profile) })
	serveRelease(t, dist)
	importImage(t, filepath.Join(dist, "gpu-dra-driver_"+version+"_image.oci.tar"))
	if out, err := exec.Command("helm", "search", "repo", releaseChart, "--version", chart.Version).CombinedOutput(); err != nil || !strings.Contains(string(out), chart.Version) {
		t.Fatalf("helm search repo %s: %v\n%s", releaseChart, err, out)
	}
	deployChart(t, releaseChart, chart.AppVersion, profile)
	w := runWorkload(t, releaseNS, "whole")

	bin := krew(t)
	// krew installs plugins under KREW_ROOT/bin, where kubectl finds them;
	// no upgrade check (nothing outside is reachable).
	krewRoot := filepath.Join(t.TempDir(), "krew")
	env := []string{"KREW_ROOT=" + krewRoot, "KREW_NO_UPGRADE_CHECK=1", "PATH=" + strings.Join([]string{filepath.Join(krewRoot, "bin"), bin, os.Getenv("PATH")}, string(os.PathListSeparator))}
	manifest := filepath.Join(dist, "plugin.yaml")
	archive := filepath.Join(dist, release.Platform{OS: "linux", Arch: "amd64"}.ArchiveName(version))

	// One byte changed: krew checks the manifest's sha256 and installs nothing.
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	tampered := filepath.Join(t.TempDir(), filepath.Base(archive))
	if err := os.WriteFile(tampered, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := kubectlWith(env, "krew", "install", "--manifest="+manifest, "--archive="+tampered)
	if err == nil || !strings.Contains(out, "checksum does not match") {
		t.Fatalf("krew install of a tampered archive: %v, want a checksum error:\n%s", err, out)
	}
	if out, err := kubectlWith(env, "gpu", "version", "--client"); err == nil {
		t.Fatalf("kubectl gpu runs after the refused install:\n%s", out)
	}

	if out, err := kubectlWith(env, "krew", "install", "--manifest="+manifest, "--archive="+archive); err != nil {
		t.Fatalf("kubectl krew install --manifest=%s --archive=%s: %v\n%s", manifest, archive, err, out)
	}
	out, err = kubectlWith(env, "gpu", "usage", "-n", releaseNS)
	if err != nil || !strings.Contains(out, releaseNS+"/whole") {
		t.Errorf("kubectl gpu usage -n %s: %v; want the pod %s/whole holding a GPU:\n%s", releaseNS, err, releaseNS, out)
	}
	t.Logf("$ kubectl gpu usage -n %s\n%s", releaseNS, out)
	out, err = kubectlWith(env, "gpu", "version")
	// One plugin pod per GPU node of the cluster, node 2's too: as many
	// nodes as run one, each its own.
	all, lerr := client.CoreV1().Pods(driverNS).List(context.Background(), metav1.ListOptions{LabelSelector: pluginLabel})
	if lerr != nil {
		t.Fatal(lerr)
	}
	nodes := map[string]bool{}
	for _, p := range all.Items {
		nodes[p.Spec.NodeName] = true
	}
	if want := readyNodes(t); len(nodes) != len(all.Items) || len(nodes) != want {
		t.Errorf("%d plugin pods on %d nodes, want one on each of the %d GPU nodes", len(all.Items), len(nodes), want)
	}
	pods := fmt.Sprintf("%d plugin pods", len(all.Items))
	if len(all.Items) == 1 {
		pods = "1 plugin pod"
	}
	if err != nil || !strings.Contains(out, "Client: kubectl gpu "+version+" ") || !strings.Contains(out, "Driver: "+chart.AppVersion+" (image localhost/gpu-dra-driver:"+chart.AppVersion+", namespace "+driverNS+", "+pods+")") {
		t.Errorf("kubectl gpu version: %v; want the client %s and the driver %s:\n%s", err, version, chart.AppVersion, out)
	}
	t.Logf("$ kubectl gpu version\n%s", out)

	w.check(t, "after kubectl gpu")
	kubectl(t, "delete", "namespace", releaseNS, "--wait=true", "--timeout=120s")
	waitNodeClean(t, "after the release's pod is gone", nil)
}

// readyNodes counts the cluster's Ready nodes: those with a kubelet, each
// a GPU node here (a test's kubelet-less stand-ins are never Ready).
func readyNodes(t *testing.T) int {
	t.Helper()
	list, err := client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, node := range list.Items {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
			}
		}
	}
	return n
}
