// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// gpudra smoke prepare: one whole-GPU claim through the in-process plugin
// with real nvcdi, and the CDI spec checked as the runtime would use it.

package gpusmoke

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/node"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/simulate"
)

const smokeNode = "gpu-smoke"

type smokeOptions struct {
	driverRoot, nvmlLibrary, hook, gpu string
	timeout                            time.Duration
	// simulate, for testing this command without a GPU: simulated NVML,
	// but the real driver backend (nvcdi under driverRoot).
	simulate string
	// mpsRunner, when set, lets claims ask for MPS and runs their
	// daemons (the container step's hostMPSRunner); nil refuses MPS.
	mpsRunner sharing.Runner
}

func newSmokePrepareCommand() *cobra.Command {
	o := smokeOptions{}
	cmd := &cobra.Command{
		Use:   "prepare",
		Short: "Prepare and unprepare one whole GPU through the plugin (in-process API, real NVML and nvcdi); changes no GPU setting",
		Long: `Starts the kubelet plugin in this process against an in-process API server
stand-in, on temporary state, CDI and socket directories, with dynamic MIG off.
Every NVML call that would change a GPU (MIG mode, MIG instances, compute or
persistence mode, clocks, ...) and every time-slice or MPS change is refused
and reported. It prepares one whole-GPU claim over the kubelet gRPC API,
checks the CDI spec (every device node, mount source and hook exists, the
hook knows every subcommand the spec uses, the CDI library applies it) and
unprepares it.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := &report{out: cmd.OutOrStdout()}
			smokePrepare(cmd.Context(), r, o)
			return r.err()
		},
	}
	o.addFlags(cmd.Flags(), 2*time.Minute,
		"Testing only: simulated NVML (e.g. h100x2) with the real driver backend under --driver-root.")
	return cmd
}

// addFlags registers the flags every smoke step that prepares a GPU has
// (smoke prepare, and smoke container, whose options embed these). The
// steps differ only in how long they may take and in what --simulate
// leaves out, so those come from the caller.
func (o *smokeOptions) addFlags(f *pflag.FlagSet, timeout time.Duration, simulateHelp string) {
	f.StringVar(&o.driverRoot, "driver-root", "/", "Root of the NVIDIA driver installation.")
	f.StringVar(&o.nvmlLibrary, "nvml-library", "", "Explicit libnvidia-ml.so.1; searched under --driver-root when empty.")
	f.StringVar(&o.hook, "hook", "bin/nvidia-cdi-hook", "nvidia-cdi-hook to install and name in the spec (make build).")
	f.StringVar(&o.gpu, "gpu", "", "UUID or index of the GPU to prepare; default the first whole GPU published.")
	f.DurationVar(&o.timeout, "timeout", timeout, "Give up after this long.")
	f.StringVar(&o.simulate, "simulate", "", simulateHelp)
	_ = f.MarkHidden("simulate")
}

// refusingTools stand in for nvidia-smi compute-policy and MPS daemons.
type refusingTools struct{ r *nvdev.Refusals }

func (t refusingTools) SetTimeSlice(string, configapi.TimeSliceInterval) error {
	_ = t.r.Refuse("SetTimeSlice") // counted; the error below is what prepare sees
	return fmt.Errorf("the smoke test changes no time slice")
}
func (t refusingTools) Command(*sharing.Daemon) *exec.Cmd {
	_ = t.r.Refuse("StartMPSDaemon") // counted; the error below is what prepare sees
	return &exec.Cmd{Err: fmt.Errorf("the smoke test starts no MPS daemon")}
}
func (t refusingTools) Configure(*sharing.Daemon, sharing.Settings) error {
	_ = t.r.Refuse("ConfigureMPSDaemon") // counted; the error below is what prepare sees
	return fmt.Errorf("the smoke test configures no MPS daemon")
}

func smokePrepare(ctx context.Context, r *report, o smokeOptions) {
	s, ok := openSmoke(ctx, r, o)
	if !ok {
		return
	}
	defer s.close()
	claim := smokeClaim(s.dev)
	if resp, err := s.n.Prepare(s.ctx, claim); err != nil {
		r.fail("prepare", "%v", err)
	} else {
		ids, metadata := cdiIDs(resp)
		r.pass("prepare", "CDI devices %v", ids)
		r.check(len(metadata) == 1, "device metadata", "metadata CDI devices %v, want one for the request", metadata)
		for _, c := range cdi.CheckSpec(s.n.CDIDir(), ids, filepath.Join(s.n.Dir("hook-bin"), "nvidia-cdi-hook")) {
			r.check(c.OK, c.Name, "%s", c.Detail)
		}
	}
	s.unprepareClaim(r, "unprepare", claim)
	s.checkUnchanged(r)
}

// smokeSession is the in-process plugin of a smoke step, started with one
// whole GPU picked to prepare.
type smokeSession struct {
	ctx     context.Context
	n       *node.Node
	lib     nvml.Interface
	refused *nvdev.Refusals
	dev     *resourceapi.Device
	close   func()
}

// openSmoke starts the plugin in this process over real NVML (or the
// simulated one), with every GPU-changing call refused, and picks the GPU.
// Failures are reported; the session is closed unless ok.
func openSmoke(ctx context.Context, r *report, o smokeOptions) (s *smokeSession, ok bool) {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	n, err := node.New(node.Config{DriverName: driverName, NodeName: smokeNode, Start: startSmokeDriver(o.mpsRunner)})
	if err != nil {
		cancel()
		r.fail("work directory", "%v", err)
		return nil, false
	}
	// The node (the plugin and its health monitor) stops before NVML is
	// shut down: a real driver frees what NVML handed out at shutdown.
	var shutdownNVML func()
	s = &smokeSession{ctx: ctx, n: n, close: func() {
		n.Close()
		if shutdownNVML != nil {
			shutdownNVML()
		}
		cancel()
	}}
	defer func() {
		if !ok {
			s.close()
		}
	}()

	var lib nvml.Interface
	sysfs := "/sys"
	if o.simulate != "" {
		profile, err := simulate.ParseProfile(o.simulate)
		if err != nil {
			r.fail("simulated NVML", "%v", err)
			return nil, false
		}
		sim, err := simulate.New(profile, smokeNode, n.Dir("simulated"))
		if err != nil {
			r.fail("simulated NVML", "%v", err)
			return nil, false
		}
		// nvcdi looks for the libraries of the version NVML reports: the
		// driver root's, as in the plugin's devices node mode.
		if v, err := backend.DriverVersionIn(o.driverRoot); err == nil {
			sim.DriverVersion, sim.NvmlVersion = v, "12."+v
		}
		for _, d := range sim.Devices {
			// nvcdi asks every GPU handle whether it is a MIG device.
			if sd, ok := d.(*server.Device); ok && sd.IsMigDeviceHandleFunc == nil {
				sd.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
			}
		}
		lib, sysfs = sim, sim.SysfsRoot()
	} else {
		if lib, err = nvdev.OpenNVML(o.driverRoot, o.nvmlLibrary); err != nil {
			r.fail("NVML", "%v", err)
			return nil, false
		}
		shutdownNVML = func() { _ = lib.Shutdown() }
	}
	ro, refused := nvdev.NewReadOnly(lib)
	s.lib, s.refused = ro, refused
	hook, err := filepath.Abs(o.hook)
	if err != nil {
		r.fail("nvidia-cdi-hook", "%v", err)
		return nil, false
	}
	be, err := backend.New(ro, backend.Options{
		NodeName: smokeNode, StateDir: n.StateDir(), DriverRoot: o.driverRoot, SysfsRoot: sysfs,
		HookInstallDir: n.Dir("hook-bin"), HookSource: hook,
	})
	if err != nil {
		r.fail("driver backend", "%v", err)
		return nil, false
	}
	tools := refusingTools{refused}
	be.TimeSlicer, be.MPSLauncher = tools, tools
	r.pass("NVML discovery", "%d GPUs, driver %s", len(be.Inventory.GPUs), be.Inventory.DriverVersion)

	if err := n.Start(ctx, be); err != nil {
		r.fail("plugin start", "%v", err)
		return nil, false
	}
	if s.dev, err = pickGPU(n.Slices, o.gpu); err != nil {
		r.fail("plugin start", "%v", err)
		return nil, false
	}
	r.pass("plugin start", "%d ResourceSlices published; preparing %s (%s)", len(n.Slices), s.dev.Name, attrString(*s.dev, "uuid"))
	return s, true
}

// smokeClaim is an allocated claim for one whole GPU.
func smokeClaim(dev *resourceapi.Device) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-smoke", Namespace: "default", UID: types.UID("6a1b0c8e-5302-4d5e-9f3a-0000000000a1")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: driverName, Pool: smokeNode, Device: dev.Name}},
		}}},
	}
}

// cdiIDs splits a prepare response's CDI device IDs into the device's
// and the kubelet helper's device metadata file, which comes as a CDI
// device of its own, one per request.
func cdiIDs(resp *drapb.NodePrepareResourceResponse) (ids, metadata []string) {
	for _, d := range resp.GetDevices() {
		for _, id := range d.CdiDeviceIds {
			if strings.Contains(id, "/metadata=") {
				metadata = append(metadata, id)
			} else {
				ids = append(ids, id)
			}
		}
	}
	return ids, metadata
}

// startSmokeDriver starts the plugin as the demo does, with dynamic MIG
// off; with an MPS runner it offers MPS and runs the daemons with it.
func startSmokeDriver(mps sharing.Runner) node.StartFunc {
	cfg := driver.Config{DriverName: driverName, NodeName: smokeNode}
	if mps != nil {
		cfg.SharingStrategies, cfg.MPSRunner = []configapi.SharingStrategy{configapi.MpsStrategy}, mps
	}
	return func(ctx context.Context, dirs node.Dirs, client kubernetes.Interface, be *backend.Backend) (node.Plugin, error) {
		cfg := cfg
		cfg.Client, cfg.Backend = client, be
		cfg.StateDir, cfg.CDIDir, cfg.PluginDir, cfg.RegistrarDir = dirs.State, dirs.CDI, dirs.Plugin, dirs.Registry
		d, err := driver.Start(ctx, cfg)
		if err != nil {
			return nil, err // not a nil *Driver in a non-nil Plugin
		}
		return d, nil
	}
}

// unprepareClaim unprepares the claim and checks that nothing is left.
func (s *smokeSession) unprepareClaim(r *report, check string, claim *resourceapi.ResourceClaim) {
	err := s.n.Unprepare(s.ctx, claim)
	left, lerr := s.n.Leftovers()
	r.check(err == nil && lerr == nil && left.Empty(), check, "error %v; left behind: %d CDI specs, %d checkpoint records", errors.Join(err, lerr), len(left.CDISpecs), len(left.Records))
}

// checkUnchanged checks that no GPU-changing call was made: the step's
// last check.
func (s *smokeSession) checkUnchanged(r *report) {
	calls := s.refused.List()
	r.check(len(calls) == 0, "no GPU setting changed", "refused attempts: %v", calls)
}

func pickGPU(published []*resourceapi.ResourceSlice, want string) (*resourceapi.Device, error) {
	var all []string
	for _, s := range published {
		for i, d := range s.Spec.Devices {
			if attrString(d, "type") != "gpu" {
				continue
			}
			all = append(all, attrString(d, "uuid"))
			if want == "" || want == attrString(d, "uuid") || want == attrString(d, "index") {
				return &s.Spec.Devices[i], nil
			}
		}
	}
	if want == "" {
		return nil, fmt.Errorf("no whole GPU published (a GPU in MIG mode is published as its MIG devices)")
	}
	return nil, fmt.Errorf("GPU %q is not published as a whole GPU; published: %v", want, all)
}
