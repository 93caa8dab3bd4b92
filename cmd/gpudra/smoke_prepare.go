// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// gpudra smoke prepare: one whole-GPU claim through the in-process plugin
// with real nvcdi, and the CDI spec checked as the runtime would use it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
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
	f := cmd.Flags()
	f.StringVar(&o.driverRoot, "driver-root", "/", "Root of the NVIDIA driver installation.")
	f.StringVar(&o.nvmlLibrary, "nvml-library", "", "Explicit libnvidia-ml.so.1; searched under --driver-root when empty.")
	f.StringVar(&o.hook, "hook", "bin/nvidia-cdi-hook", "nvidia-cdi-hook to install and name in the spec (make build).")
	f.StringVar(&o.gpu, "gpu", "", "UUID or index of the GPU to prepare; default the first whole GPU published.")
	f.DurationVar(&o.timeout, "timeout", 2*time.Minute, "Give up after this long.")
	f.StringVar(&o.simulate, "simulate", "", "Testing only: simulated NVML (e.g. h100x2) with the real driver backend under --driver-root.")
	_ = f.MarkHidden("simulate")
	return cmd
}

// refusingTools stand in for nvidia-smi compute-policy and MPS daemons.
type refusingTools struct{ r *refusals }

func (t refusingTools) SetTimeSlice(string, configapi.TimeSliceInterval) error {
	_ = t.r.refuse("SetTimeSlice") // counted; the error below is what prepare sees
	return fmt.Errorf("the smoke test changes no time slice")
}
func (t refusingTools) Command(*sharing.Daemon) *exec.Cmd {
	_ = t.r.refuse("StartMPSDaemon") // counted; the error below is what prepare sees
	return &exec.Cmd{Err: fmt.Errorf("the smoke test starts no MPS daemon")}
}
func (t refusingTools) Configure(*sharing.Daemon, sharing.Settings) error {
	_ = t.r.refuse("ConfigureMPSDaemon") // counted; the error below is what prepare sees
	return fmt.Errorf("the smoke test configures no MPS daemon")
}

func smokePrepare(ctx context.Context, r *report, o smokeOptions) {
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	root, err := os.MkdirTemp("", "gpudra-smoke-")
	if err != nil {
		r.fail("work directory", "%v", err)
		return
	}
	defer os.RemoveAll(root)
	dir := func(n string) string { return filepath.Join(root, n) }

	var lib nvml.Interface
	sysfs := "/sys"
	if o.simulate != "" {
		profile, err := simulate.ParseProfile(o.simulate)
		if err != nil {
			r.fail("simulated NVML", "%v", err)
			return
		}
		sim, err := simulate.New(profile, smokeNode, dir("simulated"))
		if err != nil {
			r.fail("simulated NVML", "%v", err)
			return
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
			return
		}
		defer func() { _ = lib.Shutdown() }()
	}
	ro, refused := newReadOnlyNVML(lib)
	hook, err := filepath.Abs(o.hook)
	if err != nil {
		r.fail("nvidia-cdi-hook", "%v", err)
		return
	}
	be, err := backend.New(ro, backend.Options{
		NodeName: smokeNode, StateDir: dir("state"), DriverRoot: o.driverRoot, SysfsRoot: sysfs,
		HookInstallDir: dir("hook-bin"), HookSource: hook,
	})
	if err != nil {
		r.fail("driver backend", "%v", err)
		return
	}
	tools := refusingTools{refused}
	be.TimeSlicer, be.MPSLauncher = tools, tools
	r.pass("NVML discovery", "%d GPUs, driver %s", len(be.Inventory.GPUs), be.Inventory.DriverVersion)

	client := fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: smokeNode}})
	d, err := driver.Start(ctx, driver.Config{DriverName: driverName, NodeName: smokeNode, Client: client, Backend: be,
		StateDir: dir("state"), CDIDir: dir("cdi"), PluginDir: dir("plugin"), RegistrarDir: dir("registry")})
	if err != nil {
		r.fail("plugin start", "%v", err)
		return
	}
	defer d.Stop()
	published, err := waitForSlices(ctx, client)
	if err != nil {
		r.fail("plugin start", "%v", err)
		return
	}
	dev, err := pickGPU(published, o.gpu)
	if err != nil {
		r.fail("plugin start", "%v", err)
		return
	}
	r.pass("plugin start", "%d ResourceSlices published; preparing %s (%s)", len(published), dev.Name, attrString(*dev, "uuid"))

	claim := &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-smoke", Namespace: "default", UID: types.UID("6a1b0c8e-5302-4d5e-9f3a-0000000000a1")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
		}}}},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{{Request: "gpu", Driver: driverName, Pool: smokeNode, Device: dev.Name}},
		}}},
	}
	if _, err := client.ResourceV1().ResourceClaims("default").Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		r.fail("prepare", "%v", err)
		return
	}
	conn, err := grpc.NewClient("unix://"+d.DRASocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		r.fail("prepare", "%v", err)
		return
	}
	defer conn.Close()
	kubelet := drapb.NewDRAPluginClient(conn)
	req := &drapb.Claim{Namespace: "default", Name: claim.Name, Uid: string(claim.UID)}
	resp, err := kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{req}})
	if err == nil && resp.Claims[req.Uid].GetError() != "" {
		err = errors.New(resp.Claims[req.Uid].GetError())
	}
	if err != nil {
		r.fail("prepare", "%v", err)
	} else {
		var ids, metadata []string
		for _, d := range resp.Claims[req.Uid].GetDevices() {
			for _, id := range d.CdiDeviceIds {
				// The kubelet helper's device metadata file comes as a
				// CDI device of its own, one per request.
				if strings.Contains(id, "/metadata=") {
					metadata = append(metadata, id)
				} else {
					ids = append(ids, id)
				}
			}
		}
		r.pass("prepare", "CDI devices %v", ids)
		r.check(len(metadata) == 1, "device metadata", "metadata CDI devices %v, want one for the request", metadata)
		checkSpec(r, dir("cdi"), ids, filepath.Join(dir("hook-bin"), "nvidia-cdi-hook"))
	}

	uresp, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{req}})
	if err == nil && uresp.Claims[req.Uid].GetError() != "" {
		err = errors.New(uresp.Claims[req.Uid].GetError())
	}
	left, _ := filepath.Glob(filepath.Join(dir("cdi"), "*.json"))
	records, _ := filepath.Glob(filepath.Join(dir("state"), "checkpoint", "*.json"))
	r.check(err == nil && len(left)+len(records) == 0, "unprepare", "error %v; left behind: %d CDI specs, %d checkpoint records", err, len(left), len(records))

	calls := refused.List()
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

// checkSpec checks the claim's CDI spec as a container runtime would meet
// it on this host.
func checkSpec(r *report, cdiDir string, ids []string, installedHook string) {
	kind, _, _ := strings.Cut(strings.Join(ids, ""), "=")
	files, _ := filepath.Glob(filepath.Join(cdiDir, "*.json"))
	var spec *cdispec.Spec
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			r.fail("CDI spec", "%v", err)
			return
		}
		s, err := cdiapi.ParseSpec(data)
		if err != nil {
			r.fail("CDI spec", "%s: %v", f, err)
			return
		}
		if s.Kind == kind {
			spec, n = s, n+1
		}
	}
	if n != 1 {
		r.fail("CDI spec", "%d spec files of kind %q in %s, want 1", n, kind, cdiDir)
		return
	}
	all := []cdispec.ContainerEdits{spec.ContainerEdits}
	for _, d := range spec.Devices {
		all = append(all, d.ContainerEdits)
	}
	var nodes, missingNodes, mounts, missingMounts int
	var missing []string
	hooks := map[string][]string{} // hook path -> subcommands
	for _, e := range all {
		for _, n := range e.DeviceNodes {
			nodes++
			if n.Type == "c" && n.Major > 0 {
				continue // created by the runtime (MIG caps)
			}
			host := n.HostPath
			if host == "" {
				host = n.Path
			}
			if st, err := os.Stat(host); err != nil || st.Mode()&os.ModeCharDevice == 0 {
				missingNodes++
				missing = append(missing, host)
			}
		}
		for _, m := range e.Mounts {
			mounts++
			if _, err := os.Stat(m.HostPath); err != nil {
				missingMounts++
				missing = append(missing, m.HostPath)
			}
		}
		for _, h := range e.Hooks {
			sub := ""
			if len(h.Args) > 1 {
				sub = h.Args[1]
			}
			if !slices.Contains(hooks[h.Path], sub) {
				hooks[h.Path] = append(hooks[h.Path], sub)
			}
		}
	}
	r.check(nodes > 0 && missingNodes == 0, "CDI device nodes exist", "%d device nodes, %d missing %v", nodes, missingNodes, missing)
	r.check(mounts > 0 && missingMounts == 0, "CDI mount sources exist", "%d mounts, %d missing", mounts, missingMounts)

	var paths []string
	for p := range hooks {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	r.check(len(paths) == 1 && paths[0] == installedHook, "CDI hooks name the installed hook", "hook paths %v, installed %s", paths, installedHook)
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&0o111 == 0 {
			r.fail("hook binary "+filepath.Base(p), "%s is not an executable: %v", p, err)
			continue
		}
		var unknown []string
		subs := hooks[p]
		sort.Strings(subs)
		for _, sub := range subs {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			out, err := exec.CommandContext(ctx, p, sub, "--help").CombinedOutput()
			cancel()
			if err != nil || sub == "" || strings.Contains(string(out), "Unsupported") || !strings.Contains(string(out), sub) {
				unknown = append(unknown, sub)
			}
		}
		r.check(len(unknown) == 0, "hook knows the spec's subcommands", "%s: %s; unknown: %v", p, strings.Join(subs, " "), unknown)
	}

	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cdiDir), cdiapi.WithAutoRefresh(false))
	if err == nil {
		oc := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
		_, err = cache.InjectDevices(oc, ids...)
		if err == nil {
			r.pass("CDI spec applies", "%d devices, %d mounts, %d hooks injected into an OCI spec", len(oc.Linux.Devices), len(oc.Mounts), countHooks(oc))
			return
		}
	}
	r.fail("CDI spec applies", "%v", err)
}

func countHooks(s *oci.Spec) int {
	if s.Hooks == nil {
		return 0
	}
	return len(s.Hooks.CreateRuntime) + len(s.Hooks.CreateContainer) + len(s.Hooks.StartContainer) + len(s.Hooks.Poststart) + len(s.Hooks.Poststop)
}
