// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi/cditest"
)

// An in-place driver upgrade (issue 55, defect 2): the GPU Operator's
// driver container unloads the driver, installs another version and loads
// it, all in one boot. The GPUs keep their UUIDs, minors and addresses, so
// the identity check keeps every claim's spec, but the spec mounts the
// libraries of the old version, which are gone.

const (
	oldDriver = "550.54.15"
	newDriver = "580.95.05"
)

// nvcdiNode is a simulated node whose CDI specs come from NVIDIA's nvcdi
// over a fake driver root, as in the devices node mode (pkg/backend): the
// simulated NVML reports the root's driver version.
type nvcdiNode struct {
	*node
	root *cditest.DriverRoot
	hook string
}

func newNvcdiNode(t *testing.T, profile string, dynamicMIG bool) *nvcdiNode {
	t.Helper()
	n := &nvcdiNode{node: newNode(t, profile, dynamicMIG)}
	n.root = cditest.NewDriverRoot(t, oldDriver, len(n.inv.GPUs), false)
	if err := n.sim.MakeDeviceNodes(); err != nil {
		t.Skipf("simulated device nodes (needs CAP_MKNOD): %v", err)
	}
	n.hook = filepath.Join(t.TempDir(), cdi.HookName)
	cditest.WriteHookStandIn(t, n.hook, cditest.HookSubcommands)
	n.startPlugin()
	return n
}

// startPlugin is a plugin start on the driver installed now: NVML reports
// its version and nvcdi is built afresh, then the state is built again.
func (n *nvcdiNode) startPlugin() {
	n.t.Helper()
	n.sim.DriverVersion = n.root.Version
	e, err := cdi.NewNvcdiEdits(n.sim, cdi.NvcdiOptions{DriverRoot: n.root.Dir, DevRoot: n.sim.DevRoot(), ProcRoot: n.sim.ProcRoot(), HookPath: n.hook})
	if err != nil {
		n.t.Fatal(err)
	}
	n.cdiEdits = e
	n.restart()
}

// libraries are the driver libraries a spec text mounts, for messages.
func libraries(spec string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(spec, func(r rune) bool { return r == '"' || r == '/' }) {
		if strings.HasPrefix(f, "lib") && strings.Contains(f, ".so.") {
			out = append(out, f)
		}
	}
	return out
}

// specText is a claim's CDI spec as containerd reads it.
func (n *nvcdiNode) specText(uid types.UID) string {
	n.t.Helper()
	data, err := os.ReadFile(n.cdi.SpecPath(uid))
	if err != nil {
		n.t.Fatal(err)
	}
	return string(data)
}

// TestInPlaceDriverUpgradeRewritesKeptSpecs: the driver changes between
// two starts in the same boot; every kept claim's spec names the new
// version's libraries before the kubelet is served, and start reports
// each rewrite. A start without a driver change rewrites nothing.
func TestInPlaceDriverUpgradeRewritesKeptSpecs(t *testing.T) {
	n := newNvcdiNode(t, "h100x2", true)
	whole := claim("uid-whole", dev("gpu-0"))
	migClaim := claim("uid-mig", dev(n.mig(1, "1g.10gb", 0)))
	n.prepare(whole)
	n.prepare(migClaim)
	for _, uid := range []types.UID{whole.UID, migClaim.UID} {
		if s := n.specText(uid); !strings.Contains(s, "libcuda.so."+oldDriver) {
			t.Fatalf("claim %s: spec does not mount libcuda.so.%s: %v", uid, oldDriver, libraries(s))
		}
	}

	// A restart without an upgrade: the specs are current.
	before := n.specText(whole.UID)
	n.startPlugin()
	if report := n.state.RecoverLocal(t.Context()); len(report.Problems) != 0 || report.Kept != 2 {
		t.Fatalf("start without a driver change: report %+v, want 2 kept and no problems", report)
	}
	if n.specText(whole.UID) != before {
		t.Error("start without a driver change rewrote a kept claim's spec")
	}

	boot := n.sim.BootID()
	n.root.Install(t, newDriver) // the driver container's upgrade
	n.startPlugin()
	if n.sim.BootID() != boot {
		t.Fatal("the upgrade changed the boot ID")
	}
	report := n.state.RecoverLocal(t.Context())
	for _, uid := range []types.UID{whole.UID, migClaim.UID} {
		s := n.specText(uid)
		if strings.Contains(s, oldDriver) || !strings.Contains(s, "libcuda.so."+newDriver) {
			t.Errorf("claim %s: after the upgrade its spec does not name only the %s libraries: %v", uid, newDriver, libraries(s))
		}
		if !n.state.specIntact(uid) {
			t.Errorf("claim %s: rewritten spec does not carry its record", uid)
		}
	}
	if report.Kept != 2 || report.Unrestored != 0 {
		t.Errorf("report %+v, want both claims kept", report)
	}
	if got := strings.Join(report.Problems, "\n"); strings.Count(got, newDriver) < 2 {
		t.Errorf("start reported %q, want each rewritten claim named with the driver it was rewritten for", got)
	}
}

// TestSpecWithoutDriverVersionIsCheckedByItsLibraries: a spec written
// before specs recorded their driver version is checked against the
// library paths it names: one naming removed libraries is rewritten.
func TestSpecWithoutDriverVersionIsCheckedByItsLibraries(t *testing.T) {
	n := newNvcdiNode(t, "h100x2", false)
	c := claim("uid-old-spec", dev("gpu-1"))
	n.prepare(c)
	stripDriverVersion(t, n.cdi.SpecPath(c.UID))

	n.startPlugin() // same driver: its libraries are all there
	if report := n.state.RecoverLocal(t.Context()); len(report.Problems) != 0 {
		t.Fatalf("start on the same driver: problems %q", report.Problems)
	}
	if !strings.Contains(n.specText(c.UID), oldDriver) {
		t.Fatal("a spec whose libraries are all there was rewritten")
	}

	n.root.Install(t, newDriver)
	n.startPlugin()
	report := n.state.RecoverLocal(t.Context())
	if s := n.specText(c.UID); strings.Contains(s, oldDriver) || !strings.Contains(s, "libcuda.so."+newDriver) {
		t.Errorf("after the upgrade the old spec still names the %s libraries: %v", oldDriver, libraries(s))
	}
	if len(report.Problems) != 1 || !strings.Contains(report.Problems[0], "libcuda.so."+oldDriver) {
		t.Errorf("problems %q, want the rewrite reported with a library that is gone", report.Problems)
	}
}

// stripDriverVersion makes a spec look written by an older plugin: without
// the driver version it was written for.
func stripDriverVersion(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	delete(spec.Annotations, cdi.DriverVersionAnnotation)
	out, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}
