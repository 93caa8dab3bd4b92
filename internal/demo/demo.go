// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package demo is `gpudra demo`: the whole driver offline on simulated
// GPUs. The scheduler's allocator picks devices for a few typical claims,
// the real plugin prepares them over its kubelet socket, and the
// nvidia-smi stand-in shows what each container would see.
package demo

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/node"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

const (
	driverName = "gpu.nvidia.com"
	nodeName   = "demo-node"
)

type pod struct {
	name, what string
	claim      *resourceapi.ResourceClaim
	// containers lists, per container, the requests it uses; nil means
	// one container using the whole claim.
	containers [][]string
}

func demoPods() []pod {
	h100 := `device.attributes['gpu.nvidia.com'].productName.matches('H100')`
	bigMem := `device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('64Gi')) >= 0`
	pair := schedtest.Claim("trainer", schedtest.Request("gpus", "gpu.nvidia.com", 2))
	root := resourceapi.FullyQualifiedName("resource.kubernetes.io/pcieRoot")
	pair.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &root}}
	parent := resourceapi.FullyQualifiedName("gpu.nvidia.com/parentUUID")
	mig := func(name, profile string) resourceapi.DeviceRequest {
		return schedtest.Request(name, "mig.nvidia.com", 1, fmt.Sprintf("device.attributes['gpu.nvidia.com'].profile == '%s'", profile))
	}
	migPod := schedtest.Claim("mig-pod", mig("a", "3g.40gb"), mig("b", "2g.20gb"), mig("c", "1g.10gb"), mig("d", "1g.10gb"))
	migPod.Spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: &parent}}
	return []pod{
		{"trainer", "2 GPUs on one PCIe root", pair, nil},
		{"inference", "an H100 (productName)", schedtest.Claim("inference", schedtest.Request("gpu", "gpu.nvidia.com", 1, h100)), nil},
		{"notebook", "memory >= 64Gi", schedtest.Claim("notebook", schedtest.Request("gpu", "gpu.nvidia.com", 1, bigMem)), nil},
		{"legacy", "limits nvidia.com/gpu: 1", schedtest.Claim("legacy", schedtest.Request("container-0", "gpu.nvidia.com", 1)), nil},
		{"mig-pod", "4 MIG devices, one parent", migPod, [][]string{{"a"}, {"b"}, {"c"}, {"d"}}},
	}
}

// NewCommand is `gpudra demo`.
func NewCommand() *cobra.Command {
	var profile, smi string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the driver offline on simulated GPUs and show which GPU each pod gets",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDemo(cmd.Context(), profile, smi)
		},
	}
	cmd.Flags().StringVar(&profile, "simulate", "h100x8", "Simulated GPU profile.")
	cmd.Flags().StringVar(&smi, "nvidia-smi-stub", "bin/nvidia-smi-sim", "The nvidia-smi stand-in (make build).")
	return cmd
}

// startDriver starts the plugin of an in-process node (internal/node) as
// the DaemonSet would, publishing as publish says.
func startDriver(nodeName string, publish resourceslices.Options) node.StartFunc {
	return func(ctx context.Context, dirs node.Dirs, client kubernetes.Interface, be *backend.Backend) (node.Plugin, error) {
		d, err := driver.Start(ctx, driver.Config{DriverName: driverName, NodeName: nodeName, Client: client, Backend: be,
			StateDir: dirs.State, CDIDir: dirs.CDI, PluginDir: dirs.Plugin, RegistrarDir: dirs.Registry, Publish: publish})
		if err != nil {
			return nil, err
		}
		return d, nil
	}
}

func runDemo(ctx context.Context, profile, smi string) (err error) {
	// The allocator's failures end the demo with an error, after the
	// deferred cleanups below.
	failures := &node.Recorder{}
	defer failures.Recover(&err)
	// The plugin's own logs would drown the table; errors still reach stderr.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	n, err := node.New(node.Config{DriverName: driverName, NodeName: nodeName,
		Start: startDriver(nodeName, resourceslices.Options{DynamicMIG: true})})
	if err != nil {
		return err
	}
	defer n.Close()
	step := func(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

	step("Simulating node %s with %s", nodeName, profile)
	be, err := backend.Open(backend.Options{SimulateProfile: profile, NodeName: nodeName, StateDir: n.StateDir(), NvidiaSmiStub: smi})
	if err != nil {
		return err
	}
	if err := n.Start(ctx, be); err != nil {
		return err
	}
	devices := 0
	for _, s := range n.Slices {
		devices += len(s.Spec.Devices)
	}
	step("Plugin serving; %d ResourceSlices with %d devices (%d GPUs, dynamic MIG) published %s after start", len(n.Slices), devices, len(be.Inventory.GPUs), n.SlicesAfter.Round(time.Millisecond))

	// The allocator works on the slices the plugin actually published.
	cluster := schedtest.NewFromSlices(failures, nodeName, n.Slices)

	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tASKED FOR\tDEVICES\tnvidia-smi -L IN THE CONTAINER")
	var prepared []*resourceapi.ResourceClaim
	for _, p := range demoPods() {
		alloc := cluster.Allocate(p.claim)
		if alloc == nil {
			fmt.Fprintf(tw, "%s\t%s\t(unschedulable)\t\n", p.name, p.what)
			continue
		}
		p.claim.Status.Allocation = alloc
		r, err := n.Prepare(ctx, p.claim)
		if err != nil {
			return fmt.Errorf("prepare %s: %w", p.name, err)
		}
		prepared = append(prepared, p.claim)
		containers := p.containers
		if containers == nil {
			containers = [][]string{nil}
		}
		for i, requests := range containers {
			var ids, devices []string
			for _, dev := range r.Devices {
				if requests == nil || slicesContains(requests, dev.RequestNames) {
					ids = append(ids, dev.CdiDeviceIds...)
					devices = append(devices, dev.DeviceName)
				}
			}
			out, err := node.RunInContainer(n.CDIDir(), n.Dir(filepath.Join("containers", fmt.Sprintf("%s-%d", p.name, i))), smi, ids)
			if err != nil {
				return err
			}
			name, what := p.name, p.what
			if len(containers) > 1 {
				name = fmt.Sprintf("%s/c%d", p.name, i)
				if i > 0 {
					what = ""
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, what, strings.Join(devices, ","), strings.ReplaceAll(strings.TrimSpace(out), "\n", "\n\t\t\t"))
		}
	}
	tw.Flush()

	step("MIG instances created on the simulated GPUs: %d", n.MigInstances())
	step("Unpreparing %d claims", len(prepared))
	uerr := n.Unprepare(ctx, prepared...)
	left, err := n.Leftovers()
	if err != nil {
		return err
	}
	step("Left behind: %d CDI specs, %d checkpoint records, %d MIG instances", len(left.CDISpecs), len(left.Records), left.MigInstances)
	if uerr != nil {
		return uerr
	}
	if !left.Empty() {
		return fmt.Errorf("unprepare left %v %v behind", left.CDISpecs, left.Records)
	}
	return nil
}

func slicesContains(want, have []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}
