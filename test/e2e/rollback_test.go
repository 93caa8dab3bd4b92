// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
)

// The driver upgraded from the previous release (previousRelease: oldCommit,
// before the checkpoint format v2, while there is none) and rolled back,
// with claims of every kind prepared by each release.

const upgradeNS2 = upgradeNS + "-2"

// deployOld installs the previous release's chart with its image through
// this checkout's deploy.sh, with the same settings as `make e2e`.
func deployOld(t *testing.T, prev oldRelease, profile string) {
	t.Helper()
	deployChart(t, prev.chart, prev.tag, profile)
}

// forgetReboots makes the simulated node one that never rebooted (an
// earlier test may have rebooted it). Its MIG devices are then named as
// the simulator of oldCommit names them (pkg/simulate/boot.go), so both
// releases agree on them; the node must be clean.
func forgetReboots(t *testing.T) {
	t.Helper()
	if err := os.Remove(filepath.Join(stateDir(), "simulated", "rebooted")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// preparedWorkload is what the pods of one namespace run on, taken while
// they run, to be found unchanged after every upgrade and rollback.
type preparedWorkload struct {
	namespace  string
	pods       []string
	seen       map[string]seen              // pod/container -> what it saw
	status     map[string]map[string]string // pod -> device -> UUID in the claim's status
	timeSliced string                       // GPU of time-sliced, if run
	daemons    map[string]string            // GPU -> MPS daemon pod UID
}

func runWorkload(t *testing.T, namespace string, pods ...string) *preparedWorkload {
	t.Helper()
	testNamespace(t, namespace)
	applyYAML(t, workloadSpecs(namespace, pods...))
	waitRunningIn(t, namespace, pods...)
	w := &preparedWorkload{namespace: namespace, pods: pods, seen: map[string]seen{}, status: map[string]map[string]string{}, daemons: map[string]string{}}
	for _, p := range pods {
		for _, c := range workloadPods[p] {
			w.seen[p+"/"+c] = look(t, namespace, p, c)
		}
		w.status[p] = waitStatusUUIDs(t, namespace, claimOf(t, namespace, p, "gpu"), nil)
		switch p {
		case "time-sliced":
			w.timeSliced = w.seen[p+"/ctr"].gpu
		case "mps", "fraction":
			gpu := w.seen[p+"/ctr"].gpu
			w.daemons[gpu] = mpsDaemonFor(t, gpu)
		}
	}
	return w
}

// check finds every pod running in the same containers (never restarted),
// its claim's device status unchanged, its MIG devices there, its time
// slice and its MPS daemon the same.
func (w *preparedWorkload) check(t *testing.T, when string) {
	t.Helper()
	for _, p := range w.pods {
		pod := podIn(t, w.namespace, p)
		for _, c := range workloadPods[p] {
			cs := containerOf(pod, c)
			if cs == nil || cs.State.Running == nil || cs.RestartCount != 0 || cs.ContainerID != w.seen[p+"/"+c].containerID {
				t.Errorf("%s: %s/%s/%s is not the container that ran before (%+v)", when, w.namespace, p, c, cs)
			}
			for _, m := range w.seen[p+"/"+c].migs {
				_, uuid, _ := strings.Cut(m, "=")
				if _, err := os.Stat(filepath.Join(stateDir(), "simulated", "dev", "mig", uuid)); err != nil {
					t.Errorf("%s: MIG device %s of %s/%s is gone: %v", when, m, p, c, err)
				}
			}
		}
		if got, _ := statusUUIDs(t, w.namespace, claimOf(t, w.namespace, p, "gpu")); !equalMaps(got, w.status[p]) {
			t.Errorf("%s: device status of %s/%s names %v, before %v", when, w.namespace, p, got, w.status[p])
		}
	}
	if w.timeSliced != "" {
		if got := timeSliceOf(w.timeSliced); got != "Long" {
			t.Errorf("%s: time slice of %s is %q, want Long", when, w.timeSliced, got)
		}
	}
	for gpu, uid := range w.daemons {
		if got := mpsDaemonFor(t, gpu); got != uid {
			t.Errorf("%s: the MPS daemon of %s is pod %s, before %s: the clients lost their daemon", when, gpu, got, uid)
		}
	}
}

// keepOnly forgets every pod but pods (the others were deleted), with
// the MPS daemons and time slice only they used.
func (w *preparedWorkload) keepOnly(pods ...string) {
	w.pods = slices.DeleteFunc(w.pods, func(p string) bool { return !slices.Contains(pods, p) })
	daemons, timeSliced := map[string]string{}, ""
	for _, p := range w.pods {
		gpu := w.seen[p+"/ctr"].gpu
		if uid, ok := w.daemons[gpu]; ok && (p == "mps" || p == "fraction") {
			daemons[gpu] = uid
		}
		if p == "time-sliced" {
			timeSliced = w.timeSliced
		}
	}
	w.daemons, w.timeSliced = daemons, timeSliced
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// readRecords maps each checkpoint record file to its bytes.
func readRecords(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range checkpointRecords() {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = data
	}
	return out
}

// checkRecords fails on records moved aside, on records of a format the
// release before v2 does not read (all must be v1), on a plugin log that
// complains about its state (but for the lines tolerated matches), and
// when want (if not nil) differs from the records on disk.
func checkRecords(t *testing.T, when string, n int, want map[string][]byte, tolerated ...func(line string) bool) {
	t.Helper()
	versions, corrupt := recordVersions(t)
	if len(corrupt) != 0 {
		t.Errorf("%s: records moved aside: %v", when, corrupt)
	}
	if len(versions) != n {
		t.Errorf("%s: %d records, want %d", when, len(versions), n)
	}
	for uid, v := range versions {
		if v != "gpu.nvidia.com/checkpoint/v1" {
			t.Errorf("%s: record of claim %s is %s; the release before v2 reads only v1", when, uid, v)
		}
	}
	for name, data := range want {
		if got, ok := readRecords(t)[name]; !ok || !bytes.Equal(got, data) {
			t.Errorf("%s: record %s rewritten or gone:\n before %s\n now    %s", when, name, data, got)
		}
	}
	for _, line := range strings.Split(pluginLogs(t, pluginPod(t).Name, false), "\n") {
		if complaint.MatchString(line) && !slices.ContainsFunc(tolerated, func(ok func(string) bool) bool { return ok(line) }) {
			t.Errorf("%s: the plugin complains: %s", when, line)
		}
	}
}

// migPairDevices are the MIG devices of namespace's mig-pair claim; each
// must be named in the form of the release that allocated it: without the
// GPU instance profile ID (legacy, oldCommit) or with it (this checkout).
func migPairDevices(t *testing.T, namespace string, legacy bool) []string {
	t.Helper()
	var out []string
	for _, d := range allocatedDevices(t, namespace, claimOf(t, namespace, "mig-pair", "gpu")) {
		if n, ok := deviceattr.ParseMigDeviceName(d); !ok || (n.GIProfileID < 0) != legacy {
			t.Errorf("%s/mig-pair holds %s: want a MIG device named as the release that allocated it names them (legacy %v)", namespace, d, legacy)
		}
		out = append(out, d)
	}
	return out
}

// currentDeviceNames waits for the slices of this checkout's plugin (its
// dynamic MIG devices carry the profile ID) and returns their device names.
func currentDeviceNames(t *testing.T) []string {
	t.Helper()
	var names []string
	waitFor(t, "slices with this checkout's MIG device names", 60*time.Second, func() (bool, string) {
		names = nil
		current := false
		for _, s := range completePool(t) {
			for _, d := range s.Spec.Devices {
				names = append(names, d.Name)
				if n, ok := deviceattr.ParseMigDeviceName(d.Name); ok && n.GIProfileID >= 0 {
					current = true
				}
			}
		}
		return current, strings.Join(names, " ")
	})
	return names
}

// TestUpgradeAndDowngradeKeepClaims installs the chart and image of the
// previous release (previousRelease; while CHANGELOG.md names none,
// oldCommit, the last commit of checkpoint format v1, which names dynamic
// MIG devices without the GPU instance profile ID), prepares claims of
// every kind, upgrades to this checkout, prepares more, rolls back to
// oldCommit and upgrades again. Every running pod keeps its container and
// devices throughout; each release unprepares what the other prepared,
// but for the MIG claim allocated under this checkout's names, which is
// unprepared after upgrading again (oldCommit would leave its MIG devices
// behind: docs/node-lifecycle.md, "Dynamic MIG device names"); nothing is
// left over at the end.
func TestUpgradeAndDowngradeKeepClaims(t *testing.T) {
	requireCleanNode(t)
	const profile = "h100x8"
	prev := previousRelease(t)
	// The tests after this one run on the current driver, whatever happens.
	t.Cleanup(func() { deployCurrent(t, profile) })
	forgetReboots(t)
	// v0.2.0's exact-pod policy refuses its own MPS daemon pod on a cluster
	// with a globalDefault PriorityClass (issue 55, defect 1, fixed after
	// it): the cluster's default class is off while that release prepares,
	// and on again for this checkout's claims.
	restoreDefault := withoutDefaultPriorityClass(t)
	deployOld(t, prev, profile)

	old := runWorkload(t, upgradeNS, allWorkloads...)
	oldMigs := migPairDevices(t, upgradeNS, prev.legacy)
	oldRecords := readRecords(t)
	checkRecords(t, "prepared by "+prev.name, len(allWorkloads), nil)

	deployCurrent(t, profile)
	restoreDefault()
	old.check(t, "after the upgrade")
	checkRecords(t, "after the upgrade", len(allWorkloads), oldRecords)
	// The MIG devices held under their old names stay published, so that
	// the scheduler counts them and places the next MIG claim beside them.
	published := currentDeviceNames(t)
	for _, d := range oldMigs {
		if !slices.Contains(published, d) {
			t.Errorf("after the upgrade the held %s is not published: %v", d, published)
		}
	}
	// Claims prepared by this release: the node has room for three more.
	current := runWorkload(t, upgradeNS2, "whole", "mig-pair", "fraction")
	newMigs := migPairDevices(t, upgradeNS2, false)
	checkRecords(t, "prepared after the upgrade", len(allWorkloads)+3, nil)

	deployOld(t, prev, profile)
	old.check(t, "after the rollback")
	current.check(t, "after the rollback")
	// oldCommit does not know the new names: it says so for each, and
	// keeps the claim running. A release that names them as this checkout
	// does has nothing to say.
	lostNew := func(line string) bool {
		return prev.legacy && strings.Contains(line, "Prepared claim lost a device") && slices.ContainsFunc(newMigs, func(d string) bool { return strings.Contains(line, d) })
	}
	checkRecords(t, "after the rollback", len(allWorkloads)+3, nil, lostNew)
	logs := strings.Split(pluginLogs(t, pluginPod(t).Name, false), "\n")
	for _, d := range newMigs {
		if prev.legacy && !slices.ContainsFunc(logs, func(line string) bool { return lostNew(line) && strings.Contains(line, d) }) {
			t.Errorf("after the rollback %s does not say that it does not know %s", prev.name, d)
		}
	}
	// The old release unprepares claims this one prepared, but for the
	// MIG devices it does not know by their new names: it would leave them
	// behind (docs/node-lifecycle.md). mig-pair waits for the upgrade.
	kubectl(t, "delete", "pod", "-n", upgradeNS2, "whole", "fraction", "--wait=true", "--timeout=120s")
	waitFor(t, "the records of "+upgradeNS2+"'s whole and fraction claims gone", 60*time.Second, func() (bool, string) {
		n := len(checkpointRecords())
		return n == len(allWorkloads)+1, strings.Join(checkpointRecords(), " ")
	})
	current.keepOnly("mig-pair")
	old.check(t, "after the rollback and deleting "+upgradeNS2+"'s whole and fraction")
	current.check(t, "after the rollback and deleting "+upgradeNS2+"'s whole and fraction")
	afterRollback := readRecords(t)

	deployCurrent(t, profile)
	old.check(t, "after upgrading again")
	current.check(t, "after upgrading again")
	checkRecords(t, "after upgrading again", len(allWorkloads)+1, afterRollback)
	if n := migInstances(t); n != len(oldMigs)+len(newMigs) {
		t.Errorf("after upgrading again: %d MIG instances, want the %d of %s and the %d of %s", n, len(oldMigs), upgradeNS, len(newMigs), upgradeNS2)
	}
	// This release unprepares the claim it prepared before the rollback.
	kubectl(t, "delete", "namespace", upgradeNS2, "--wait=true", "--timeout=120s")
	waitFor(t, "the MIG devices of "+upgradeNS2+"'s mig-pair destroyed", 60*time.Second, func() (bool, string) {
		n := migInstances(t)
		return n == len(oldMigs), fmt.Sprintf("%d MIG instances", n)
	})
	old.check(t, "after deleting "+upgradeNS2)
	kubectl(t, "delete", "namespace", upgradeNS, "--wait=true", "--timeout=120s")
	waitNodeClean(t, "after upgrading again and deleting every pod", nil)
}

// withoutDefaultPriorityClass turns the cluster's globalDefault
// PriorityClasses off (hack/cluster/cluster.sh makes one) and returns what
// turns them on again; the test's cleanup does too.
func withoutDefaultPriorityClass(t *testing.T) func() {
	t.Helper()
	out, err := exec.Command("kubectl", "get", "priorityclass", "-o", `jsonpath={range .items[?(@.globalDefault==true)]}{.metadata.name}{" "}{end}`).Output()
	if err != nil {
		t.Fatalf("list PriorityClasses: %v", err)
	}
	names := strings.Fields(string(out))
	set := func(on bool) {
		for _, n := range names {
			if b, err := exec.Command("kubectl", "patch", "priorityclass", n, "--type=merge", "-p", fmt.Sprintf(`{"globalDefault":%v}`, on)).CombinedOutput(); err != nil {
				t.Errorf("PriorityClass %s globalDefault=%v: %v\n%s", n, on, err, b)
			}
		}
	}
	set(false)
	restore := sync.OnceFunc(func() { set(true) })
	t.Cleanup(restore)
	return restore
}
