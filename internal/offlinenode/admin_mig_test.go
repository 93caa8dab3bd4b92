// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package offlinenode

import (
	"bytes"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

// adminNode is a simulated node as a stopped plugin leaves it: its state
// dir with the simulator's files.
func adminNode(t *testing.T) adminMigOptions {
	t.Helper()
	state := t.TempDir()
	if _, _, err := simulate.Discover("h100x2", "n1", filepath.Join(state, "simulated")); err != nil {
		t.Fatal(err)
	}
	return adminMigOptions{offlineNode: offlineNode{profile: "h100x2", nodeName: "n1", stateDir: state}, pluginDir: state, gpu: 1}
}

// pluginView is what a plugin started on the node discovers.
func pluginView(t *testing.T, o adminMigOptions) *nvdev.GPU {
	t.Helper()
	_, inv, err := simulate.Discover(o.profile, o.nodeName, filepath.Join(o.stateDir, "simulated"))
	if err != nil {
		t.Fatal(err)
	}
	return inv.GPUs[o.gpu]
}

// TestSimulateAdminMig: an admin's two 3g.40gb devices on GPU 1 are what
// the plugin then finds and publishes as static MIG, with the UUIDs the
// command printed; --destroy-all leaves the GPU as it was, MIG mode off.
func TestSimulateAdminMig(t *testing.T) {
	o := adminNode(t)
	before := pluginView(t, o)
	if before.MigEnabled || len(before.MigDevices) != 0 {
		t.Fatalf("fresh GPU 1: MIG mode %v, %d MIG devices", before.MigEnabled, len(before.MigDevices))
	}
	o.create = []string{"3g.40gb", "3g.40gb"}
	var out bytes.Buffer
	if err := simulateAdminMig(&out, o); err != nil {
		t.Fatal(err)
	}
	g := pluginView(t, o)
	var uuids []string
	for _, m := range g.MigDevices {
		if m.Profile.Name != "3g.40gb" || !strings.Contains(out.String(), m.UUID) || m.UUID == "" {
			t.Errorf("MIG device %s %s at slice %d is not one the command reported:\n%s", m.Profile.Name, m.UUID, m.Placement.Start, out.String())
		}
		uuids = append(uuids, m.UUID)
	}
	if len(uuids) != 2 || !g.MigEnabled {
		t.Fatalf("after --create: MIG mode %v, MIG devices %v; want two 3g.40gb", g.MigEnabled, uuids)
	}
	if mode := resourceslices.ModeOf(g, resourceslices.Options{DynamicMIG: true}); mode != resourceslices.StaticMIG {
		t.Errorf("the plugin would publish GPU 1 as %v, want static MIG", mode)
	}
	if other := pluginView(t, adminMigOptions{offlineNode: o.offlineNode, gpu: 0}); other.MigEnabled {
		t.Errorf("GPU 0 is in MIG mode; only GPU 1 was asked for")
	}

	o.create, o.destroyAll = nil, true
	out.Reset()
	if err := simulateAdminMig(&out, o); err != nil {
		t.Fatal(err)
	}
	if g := pluginView(t, o); g.MigEnabled || len(g.MigDevices) != 0 {
		t.Errorf("after --destroy-all: MIG mode %v, %d MIG devices; want neither (%s)", g.MigEnabled, len(g.MigDevices), out.String())
	}
	if !strings.Contains(out.String(), "2 MIG devices destroyed") {
		t.Errorf("--destroy-all reports %q", out.String())
	}
}

// TestSimulateAdminMigRefuses: a running plugin, a GPU a claim holds, an
// unknown GPU or profile: nothing is changed and the error says why.
func TestSimulateAdminMigRefuses(t *testing.T) {
	o := adminNode(t)
	uuid := pluginView(t, o).UUID

	unknownProfile := o
	unknownProfile.create = []string{"3g.40gb", "5g.50gb"}
	unknownGPU := o
	unknownGPU.gpu, unknownGPU.create = 7, []string{"3g.40gb"}

	running := o
	running.pluginDir, running.create = t.TempDir(), []string{"3g.40gb"}
	l, err := net.Listen("unix", filepath.Join(running.pluginDir, "dra-pod.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	held := adminNode(t)
	held.create = []string{"3g.40gb"}
	store, _, err := checkpoint.Open(checkpoint.Dir(held.stateDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(checkpoint.PreparedClaim{UID: "c1", Namespace: "ns", Name: "train", State: checkpoint.PrepareCompleted,
		Devices: []checkpoint.PreparedDevice{{Pool: "n1", Device: "gpu-1", Type: "gpu", UUID: uuid}}}); err != nil {
		t.Fatal(err)
	}

	for name, tc := range map[string]struct {
		o    adminMigOptions
		want []string
	}{
		"unknown profile": {unknownProfile, []string{`--create "5g.50gb"`, "3g.40gb", "1g.10gb"}},
		"unknown GPU":     {unknownGPU, []string{"--gpu 7", "[0 1]"}},
		"plugin running":  {running, []string{"the plugin is running", "dra-pod.sock"}},
		"GPU held":        {held, []string{"--gpu 1", "claim ns/train holds gpu-1"}},
	} {
		t.Run(name, func(t *testing.T) {
			err := simulateAdminMig(&bytes.Buffer{}, tc.o)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v, want it to say %q", err, w)
				}
			}
			gpu1 := tc.o
			gpu1.gpu = 1
			if g := pluginView(t, gpu1); g.MigEnabled || len(g.MigDevices) != 0 {
				t.Errorf("refused, yet GPU 1 has MIG mode %v and %d MIG devices", g.MigEnabled, len(g.MigDevices))
			}
		})
	}
	// The held claim's GPU is refused for --destroy-all too.
	held.create, held.destroyAll = nil, true
	if err := simulateAdminMig(&bytes.Buffer{}, held); err == nil || !strings.Contains(err.Error(), "holds gpu-1") {
		t.Errorf("--destroy-all on a held GPU: %v", err)
	}
}
