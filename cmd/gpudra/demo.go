// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	oci "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/internal/schedtest"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

const (
	driverName = "gpu.nvidia.com"
	nodeName   = "demo-node"
)

// fatal adapts log.Fatal to schedtest.T.
type fatal struct{}

func (fatal) Helper() {}
func (fatal) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "Error: "+format+"\n", args...)
	os.Exit(1)
}

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

func newDemoCommand() *cobra.Command {
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

func runDemo(ctx context.Context, profile, smi string) error {
	// The plugin's own logs would drown the table; errors still reach stderr.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	root, err := os.MkdirTemp("", "gpudra-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	dir := func(n string) string { return filepath.Join(root, n) }
	step := func(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

	step("Simulating node %s with %s", nodeName, profile)
	be, err := backend.Open(backend.Options{SimulateProfile: profile, NodeName: nodeName, StateDir: dir("state"), NvidiaSmiStub: smi})
	if err != nil {
		return err
	}
	client := fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	// Watch for the slices while the plugin starts: they are in the API
	// before Start returns.
	type publication struct {
		slices []*resourceapi.ResourceSlice
		after  time.Duration
		err    error
	}
	start := time.Now()
	watched := make(chan publication, 1)
	go func() {
		s, err := waitForSlices(ctx, client)
		watched <- publication{s, time.Since(start), err}
	}()
	d, err := driver.Start(ctx, driver.Config{DriverName: driverName, NodeName: nodeName, Client: client, Backend: be,
		StateDir: dir("state"), CDIDir: dir("cdi"), PluginDir: dir("plugin"), RegistrarDir: dir("registry"), Publish: resourceslices.Options{DynamicMIG: true}})
	if err != nil {
		return err
	}
	defer d.Stop()
	pub := <-watched
	if pub.err != nil {
		return pub.err
	}
	published := pub.slices
	devices := 0
	for _, s := range published {
		devices += len(s.Spec.Devices)
	}
	step("Plugin serving; %d ResourceSlices with %d devices (%d GPUs, dynamic MIG) published %s after start", len(published), devices, len(be.Inventory.GPUs), pub.after.Round(time.Millisecond))

	conn, err := grpc.NewClient("unix://"+d.DRASocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	kubelet := drapb.NewDRAPluginClient(conn)
	// The allocator works on the slices the plugin actually published.
	cluster := schedtest.NewFromSlices(fatal{}, nodeName, published)

	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tASKED FOR\tDEVICES\tnvidia-smi -L IN THE CONTAINER")
	var prepared []*drapb.Claim
	for _, p := range demoPods() {
		alloc := cluster.Allocate(p.claim)
		if alloc == nil {
			fmt.Fprintf(tw, "%s\t%s\t(unschedulable)\t\n", p.name, p.what)
			continue
		}
		p.claim.Status.Allocation = alloc
		if _, err := client.ResourceV1().ResourceClaims("default").Create(ctx, p.claim, metav1.CreateOptions{}); err != nil {
			return err
		}
		req := &drapb.Claim{Namespace: "default", Name: p.claim.Name, Uid: string(p.claim.UID)}
		resp, err := kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{req}})
		if err != nil {
			return err
		}
		r := resp.Claims[req.Uid]
		if r.Error != "" {
			return fmt.Errorf("prepare %s: %s", p.name, r.Error)
		}
		prepared = append(prepared, req)
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
			out, err := runInContainer(dir("cdi"), filepath.Join(root, "containers", fmt.Sprintf("%s-%d", p.name, i)), smi, ids)
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

	sim := be.Simulator
	migInstances := func() int {
		n := 0
		for _, g := range be.Inventory.GPUs {
			n += sim.MigInstanceCount(g.UUID)
		}
		return n
	}
	step("MIG instances created on the simulated GPUs: %d", migInstances())
	step("Unpreparing %d claims", len(prepared))
	if _, err := kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: prepared}); err != nil {
		return err
	}
	left, _ := filepath.Glob(filepath.Join(dir("cdi"), "*.json"))
	records, _ := filepath.Glob(filepath.Join(dir("state"), "checkpoint", "*.json"))
	step("Left behind: %d CDI specs, %d checkpoint records, %d MIG instances", len(left), len(records), migInstances())
	if len(left)+len(records)+migInstances() > 0 {
		return fmt.Errorf("unprepare left %v %v behind", left, records)
	}
	return nil
}

// runInContainer applies the CDI devices to an OCI spec as containerd
// would, lays out the container's /dev from the spec's mounts, and runs the
// nvidia-smi stand-in against it.
func runInContainer(cdiDir, containerDir, smi string, ids []string) (string, error) {
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(cdiDir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		return "", err
	}
	spec := &oci.Spec{Process: &oci.Process{}, Linux: &oci.Linux{}}
	if _, err := cache.InjectDevices(spec, ids...); err != nil {
		return "", fmt.Errorf("CDI injection: %w", err)
	}
	devDir := filepath.Join(containerDir, "dev")
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		return "", err
	}
	for _, m := range spec.Mounts {
		if strings.HasPrefix(m.Destination, "/dev/") {
			target := filepath.Join(devDir, strings.TrimPrefix(m.Destination, "/dev/"))
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return "", err
			}
			if err := os.Symlink(m.Source, target); err != nil {
				return "", err
			}
		}
	}
	cmd := exec.Command(smi, "-L")
	cmd.Env = append(spec.Process.Env, "NVIDIA_SMI_SIM_DEV_DIR="+devDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nvidia-smi stand-in %s: %w: %s (run make build first)", smi, err, out)
	}
	return string(out), nil
}

func waitForSlices(ctx context.Context, client *fake.Clientset) ([]*resourceapi.ResourceSlice, error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		// Complete once every slice the pool announces is there.
		if resourceslices.CompletePool(list.Items) {
			out := make([]*resourceapi.ResourceSlice, 0, len(list.Items))
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			return out, nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil, fmt.Errorf("no ResourceSlice published within 10s")
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
