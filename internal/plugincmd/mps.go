// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/kubernetes"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// mpsOptions place MPS control daemons in pods of their own.
type mpsOptions struct {
	namespace string
	image     string
	// daemonDefaults: the simulator's devices node mode (PodRunner.DaemonDefaults).
	daemonDefaults bool
	// shmSize: PodRunner.ShmSize; shareAcrossNamespaces: MPS.ShareAcrossNamespaces.
	shmSize               quantityFlag
	shareAcrossNamespaces bool
	// priorityClassName: PodRunner.PriorityClassName.
	priorityClassName string
}

// quantityFlag is a resource quantity flag, checked when parsed.
type quantityFlag struct{ q resource.Quantity }

func (f *quantityFlag) String() string { return f.q.String() }
func (f *quantityFlag) Type() string   { return "quantity" }
func (f *quantityFlag) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return err
	}
	if q.Sign() <= 0 {
		return fmt.Errorf("%s is not a positive size", s)
	}
	f.q = q
	return nil
}

func (m *mpsOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&m.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "Namespace of the plugin, where it runs MPS control daemons as pods of their own so that they outlive the plugin (env POD_NAMESPACE).")
	f.StringVar(&m.image, "mps-daemon-image", os.Getenv("MPS_DAEMON_IMAGE"), "Image of MPS control daemon pods: this plugin's own image (env MPS_DAEMON_IMAGE). Without it and --namespace, MPS daemons run as processes of the plugin and die with its container.")
	m.shmSize.q = sharing.DefaultShmSize
	f.Var(&m.shmSize, "mps-shm-size", "Size of the /dev/shm an MPS daemon shares with its clients: a tmpfs (the daemon pod's emptyDir in memory) that clients cannot write past (chart value sharing.mps.shmSize).")
	f.StringVar(&m.priorityClassName, "mps-priority-class-name", sharing.DefaultPriorityClassName, "PriorityClass of MPS daemon pods. They name one so that Priority admission never gives them a cluster's default class, which the chart's admission policy would refuse (chart value sharing.mps.priorityClassName).")
	f.BoolVar(&m.shareAcrossNamespaces, "mps-share-across-namespaces", false, "Let claims of different namespaces share a device's MPS daemon. MPS clients of one server are not isolated from each other (/dev/shm, control pipe); off, such a claim is refused at prepare (chart value sharing.mps.shareAcrossNamespaces).")
}

// runner returns the pod runner when both flags are set, nil otherwise.
func (m *mpsOptions) runner(client kubernetes.Interface, nodeName, hostDriverRoot, kubeletDir string) sharing.Runner {
	if m.namespace == "" || m.image == "" {
		return nil
	}
	return &sharing.PodRunner{Client: client, Namespace: m.namespace, NodeName: nodeName, Image: m.image, HostDriverRoot: hostDriverRoot, DaemonDefaults: m.daemonDefaults,
		ShmSize: m.shmSize.q, KubeletDir: kubeletDir, PriorityClassName: m.priorityClassName}
}

// mpsDaemonCommand is what a daemon pod runs: one device's MPS control
// daemon in the foreground until the pod is deleted.
func mpsDaemonCommand() *cobra.Command {
	p := sharing.DaemonProgram{Log: os.Stderr}
	cmd := &cobra.Command{
		Use:    "mps-control-daemon",
		Short:  "Run one device's MPS control daemon (what the plugin's daemon pods run)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			return p.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&p.DeviceUUID, "device", "", "UUID of the GPU or MIG device.")
	cmd.Flags().StringVar(&p.Dir, "dir", "/mps", "The daemon's directory, for its pid file.")
	cmd.Flags().StringVar(&p.DriverRoot, "driver-root", "", "Driver root to chroot into; empty runs the simulated stand-in.")
	cmd.Flags().StringVar(&p.Dirs.Pipe, "pipe-dir", sharing.ContainerPipeDir, "The daemon's pipe directory inside the driver root.")
	cmd.Flags().StringVar(&p.Dirs.Log, "log-dir", sharing.ContainerLogDir, "The daemon's log directory inside the driver root.")
	cmd.Flags().IntVar(&p.Defaults.ActiveThreadPercentage, "default-active-thread-percentage", 0, "Set the daemon's default active thread percentage (0: NVIDIA's default).")
	cmd.Flags().Int64Var(&p.Defaults.PinnedMemoryBytes, "default-pinned-memory-bytes", 0, "Set the daemon's default pinned device memory limit (0: none).")
	return cmd
}

// mpsClientStandInCommand is a simulated MPS client for tests on simulated
// GPUs: it stays connected to its daemon and fails when the daemon goes.
func mpsClientStandInCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "mps-client-standin",
		Short:  "Simulated MPS client: print the daemon's heartbeat until it goes",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			dir := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
			if dir == "" {
				dir = sharing.ContainerPipeDir
			}
			return sharing.RunStandInClient(ctx, dir, cmd.OutOrStdout())
		},
	}
}

// mpsHostDriverRoot is the driver root daemon pods mount: the host's path,
// or "" when simulating files (daemon pods then run the stand-in).
func (o *options) mpsHostDriverRoot() string {
	if o.backend.SimulateProfile != "" && o.backend.SimulateNodeMode != backend.NodeModeDevices {
		return ""
	}
	if o.backend.HostDriverRoot != "" {
		return o.backend.HostDriverRoot
	}
	return o.backend.DriverRoot
}
