// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package plugincmd is the gpu-kubelet-plugin command, the node plugin of
// the GPU DRA driver: flags -> config -> run (cmd/gpu-kubelet-plugin only
// calls NewCommand).
package plugincmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// portBusyGrace is how long the metrics and probes port may stay taken
// before the plugin logs it as an error: the old pod of a rolling update
// lets go of it within its termination grace period.
const portBusyGrace = 30 * time.Second

// NewCommand is the gpu-kubelet-plugin command with its flags and
// subcommands.
func NewCommand() *cobra.Command { return newCommand() }

func newCommand() *cobra.Command { return commandFor(&options{}) }

// commandFor is the command that fills in o.
func commandFor(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "gpu-kubelet-plugin",
		Short:         "Kubernetes DRA kubelet plugin for NVIDIA GPUs",
		Version:       version.Get().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.printSlices {
				return printSlices(cmd, o)
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			return run(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.driverName, "driver-name", "gpu.nvidia.com", "DRA driver name published in ResourceSlices.")
	f.StringVar(&o.nodeName, "node-name", os.Getenv("NODE_NAME"), "Name of this node (env NODE_NAME).")
	f.StringVar(&o.podUID, "pod-uid", os.Getenv("POD_UID"), "UID of the plugin pod; enables seamless rolling updates (env POD_UID).")
	f.StringVar(&o.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "Kubeconfig file; in-cluster config when empty.")
	f.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 50, "Sustained API requests per second. client-go's default of 5 would throttle prepare to a handful per second.")
	f.IntVar(&o.kubeAPIBurst, "kube-api-burst", 100, "API request burst.")
	f.Float32Var(&o.statusQPS, "status-api-qps", 50, "Sustained requests per second of the background device-status writes. They have their own client and rate limiter, so they never delay the claim lookup inside prepare (--kube-api-qps).")
	f.IntVar(&o.statusBurst, "status-api-burst", 100, "Request burst of the background device-status writes.")
	f.StringVar(&o.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "Kubelet root directory (plugins/ and plugins_registry/ are under it).")
	f.StringVar(&o.stateDir, "state-dir", "", "Checkpoint and simulator state; default <kubelet-dir>/plugins/<driver-name>.")
	f.StringVar(&o.cdiRoot, "cdi-root", "/var/run/cdi", "Directory containerd reads CDI specs from.")
	f.StringVar(&o.bootIDFile, "boot-id-file", "", "File holding the node's boot ID, which tells a reboot from a plugin restart; default "+driver.DefaultBootIDFile+" (a simulated node's own file with --simulate).")
	f.StringVar(&o.httpEndpoint, "http-endpoint", ":9402", "Address for /metrics, /healthz and /readyz; empty to disable.")
	f.BoolVar(&o.fractional, "fractional-memory", false, "Offer whole GPUs for memory-fraction sharing: many claims each take a share of memory (and compute), enforced with MPS. GPUs so offered are not partitioned into MIG devices.")
	f.IntSliceVar(&o.fractionalOn, "fractional-memory-gpus", nil, "Limit --fractional-memory to these GPU minor numbers; all GPUs when empty.")
	f.StringSliceVar(&o.migProfiles, "mig-profiles", nil, "With DynamicMIG, publish only these MIG profiles (e.g. 1g.10gb,3g.40gb,7g.80gb) besides the whole GPU: the scheduler's work per node grows with the devices it publishes, 26 per H100 with every profile. Empty publishes every profile; a GPU that has none of them is published whole, as without DynamicMIG. MIG devices an admin created are always published.")
	f.StringSliceVar(&o.strategies, "sharing-strategies", []string{"TimeSlicing", "MPS"}, "Sharing strategies claims may ask for (TimeSlicing, MPS).")
	f.StringVar(&o.taintEffect, "health-taint-effect", "NoSchedule", "Effect of the gpu.nvidia.com/unhealthy taint an unhealthy device gets: NoSchedule (new claims avoid it) or NoExecute (pods using it are evicted too).")
	f.StringSliceVar(&o.ignoredXIDs, "health-ignored-xids", nil, "XIDs to ignore in addition to the application XIDs NVIDIA's tools ignore (13, 31, 43, 45, 68, 109).")
	o.mps.addFlags(cmd)
	o.shares.addFlags(cmd)
	cmd.AddCommand(mpsDaemonCommand(), mpsClientStandInCommand())
	o.gates = newFeatureGates()
	o.gates.AddFlag(f)
	f.BoolVar(&o.monitorDevices, "monitor-devices", true, "Publish each GPU a second time as a counter-free monitor device that only admin-access requests get (class monitor.<driver-name>), so monitoring agents schedule on busy dynamic-MIG nodes; false halves the devices of whole-GPU nodes.")
	f.StringSliceVar(&o.passthroughGPUs, "passthrough-gpus", nil, "Offer these GPUs to virtual machines as well (a second device of type vfio, class vfio.<driver-name>, bound to vfio-pci at prepare): 'all', or PCI addresses (0000:3b:00.0) and minor numbers. Needs the IOMMU and vfio-pci on the host (docs/passthrough.md).")
	f.BoolVar(&o.deviceMetadata, "device-metadata", true, "Give each container a file under /var/run/kubernetes.io/dra-device-attributes describing its devices (UUID, memory, MIG profile, sharing in force); a CDI device per request carries it, so any kubelet with CDI mounts it.")
	f.BoolVar(&o.printSlices, "print-slices", false, "Print the ResourceSlices this node would publish as YAML and exit; needs no cluster.")
	f.StringVar(&o.backend.SimulateProfile, "simulate", os.Getenv("SIMULATE_PROFILE"), "Simulate GPUs instead of using NVML, e.g. h100x8, a100-40gbx8, a100-80gbx4, h200x8, gh200x1 (env SIMULATE_PROFILE).")
	f.StringSliceVar(&o.nodeProfiles, "simulate-node-profiles", splitEnv("SIMULATE_NODE_PROFILES"), "Simulated profiles of named nodes, node=profile,... (e.g. gpu-node-2=a100-80gbx4:mig): the plugin on a named node simulates its profile instead of --simulate's, so one DaemonSet simulates a mixed fleet (env SIMULATE_NODE_PROFILES).")
	f.StringVar(&o.backend.SimulateNodeMode, "simulate-node-mode", envOr("SIMULATE_NODE_MODE", backend.NodeModeFiles), "With --simulate: files stands files in for device nodes and NVIDIA's userspace; devices simulates only the GPUs (NVML, MIG, time slices) and uses the real userspace under --driver-root: nvcdi's CDI specs, nvidia-cdi-hook, NVIDIA's MPS control daemon, and real device nodes the simulator creates (needs CAP_MKNOD) (env SIMULATE_NODE_MODE).")
	f.StringVar(&o.backend.NvidiaSmiStub, "nvidia-smi-stub", "", "nvidia-smi stand-in exposed to simulated containers; default nvidia-smi-sim next to this binary.")
	f.StringVar(&o.backend.DriverRoot, "driver-root", "/", "Root of the NVIDIA driver installation on the host, e.g. /run/nvidia/driver.")
	f.StringVar(&o.backend.HostDriverRoot, "host-driver-root", "", "--driver-root as the host sees it, when the plugin runs in a container with the driver mounted elsewhere; CDI specs use host paths. Defaults to --driver-root.")
	f.StringVar(&o.backend.NVMLLibrary, "nvml-library", "", "Explicit path of libnvidia-ml.so.1; searched under --driver-root when empty (its ld cache, then NVIDIA's library directories).")
	f.DurationVar(&o.nvmlRetry, "nvml-retry-interval", time.Second, "While NVML is not ready (no libnvidia-ml yet, kernel module not loaded), the plugin stays up, not ready, and tries again after this long, doubling up to --nvml-retry-max-interval.")
	f.DurationVar(&o.nvmlRetryMax, "nvml-retry-max-interval", 30*time.Second, "Longest pause between two tries to initialize NVML.")
	f.StringVar(&o.backend.HookPath, "nvidia-cdi-hook-path", "", "Host path of nvidia-cdi-hook for CDI hooks; overrides --cdi-hook-install-dir. Default with neither: /usr/bin/nvidia-cdi-hook.")
	f.StringVar(&o.backend.HookInstallDir, "cdi-hook-install-dir", "", "Host directory, mounted at the same path, to install this image's nvidia-cdi-hook into; CDI specs then name it there.")
	f.StringVar(&o.backend.SysfsRoot, "sysfs-root", "/sys", "Where to read PCIe topology from.")
	f.StringVar(&o.referenceNamespace, "reference-driver-namespace", "", "Namespace of NVIDIA's reference DRA driver's release on a node switched from it: the release of its MPS claims deletes their daemon Deployments there (chart value takeover.nvidiaNamespace).")
	goflags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(goflags)
	f.AddGoFlagSet(goflags)
	return cmd
}

func printSlices(cmd *cobra.Command, o *options) error {
	if err := o.complete(); err != nil {
		return err
	}
	if o.backend.SimulateProfile != "" && !cmd.Flags().Changed("state-dir") {
		// Previewing must not need write access to the kubelet's directory.
		dir, err := os.MkdirTemp("", "gpu-dra-preview-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.backend.StateDir = dir
	}
	b, err := backend.Open(o.backend)
	if err != nil {
		return err
	}
	logMigProfiles(klog.FromContext(cmd.Context()), b.Inventory, o.publishOptions())
	// The same table the plugin publishes, with the checkpoint's dynamic
	// MIG parents when --state-dir is a live node's.
	table, err := driver.PreviewDeviceTable(b.Inventory, o.publishOptions(), o.backend.StateDir)
	if err != nil {
		return err
	}
	res := table.Resources(o.nodeName)
	if err := resourceslices.Validate(res); err != nil {
		return err
	}
	return resourceslices.PrintYAML(cmd.OutOrStdout(), resourceslices.Objects(o.driverName, o.nodeName, res))
}

func run(ctx context.Context, o *options) error {
	if err := o.complete(); err != nil {
		return err
	}
	logger := klog.FromContext(ctx)
	// First, so that every bug report's log names its build.
	bi := version.Get()
	logger.Info("GPU kubelet plugin starting", "version", bi.Version, "commit", bi.Commit, "date", bi.Date, "go", bi.GoVersion, "platform", bi.Platform)
	strategies, err := parseStrategies(o.strategies)
	if err != nil {
		return err
	}
	newAPIClients, open := o.clients, o.openBackend
	if newAPIClients == nil {
		newAPIClients = func() (kubernetes.Interface, kubernetes.Interface, error) { return newClients(o) }
	}
	if open == nil {
		open = backend.Open
	}
	client, statusClient, err := newAPIClients()
	if err != nil {
		return err
	}
	wait := &nvmlWait{open: func() (*backend.Backend, error) { return open(o.backend) }, initial: o.nvmlRetry, max: o.nvmlRetryMax,
		event: func(ctx context.Context, eventType, reason, msg string) {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			driver.RecordNodeEvent(ctx, client, o.nodeName, eventType, reason, msg)
		}}
	m := metrics.New()
	// Probes and metrics are served from the first moment: while NVML is
	// not ready and while Start runs (it waits for nothing remote, but
	// NVML and disk can be slow) the process is live and not ready.
	var started atomic.Pointer[driver.Driver]
	// Why start waits for NVIDIA's reference driver's claims, if it does.
	var referenceWait atomic.Pointer[string]
	if o.httpEndpoint != "" {
		live := func() error {
			if d := started.Load(); d != nil {
				return d.Live()
			}
			return nil
		}
		ready := func() error {
			if d := started.Load(); d != nil {
				return d.Ready()
			}
			if err := wait.notReady(); err != nil {
				return err
			}
			if s := referenceWait.Load(); s != nil && *s != "" {
				return errors.New(*s)
			}
			return errors.New("starting: discovering GPUs, restoring prepared claims")
		}
		// With host networking, the pod of a rolling update starts while
		// the old one still holds the port for a few seconds: keep trying,
		// do not exit, and call it an error only when it lasts.
		go func() {
			since := time.Now()
			for {
				addr, err := m.Serve(ctx, o.httpEndpoint, live, ready)
				if err == nil {
					logger.Info("Serving metrics and liveness", "address", addr.String())
					return
				}
				if time.Since(since) < portBusyGrace {
					logger.Info("Metrics and probes port busy (the previous plugin pod of a rolling update?); retrying", "address", o.httpEndpoint, "err", err.Error())
				} else {
					logger.Error(err, "Cannot serve metrics and probes; retrying", "address", o.httpEndpoint, "busySince", since)
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		}()
	}
	be, err := wait.run(ctx)
	if err != nil || be == nil {
		return err // nil: stopped while waiting for NVML
	}
	logMigProfiles(logger, be.Inventory, o.publishOptions())
	d, err := driver.Start(ctx, driver.Config{
		DriverName: o.driverName, NodeName: o.nodeName, Client: client, StatusClient: statusClient, Backend: be,
		StateDir: o.stateDir, CDIDir: o.cdiRoot, MPSShareAcrossNamespaces: o.mps.shareAcrossNamespaces, ReferenceNamespace: o.referenceNamespace,
		PluginDir:         filepath.Join(o.kubeletDir, "plugins", o.driverName),
		RegistrarDir:      filepath.Join(o.kubeletDir, "plugins_registry"),
		RollingUpdateUID:  types.UID(o.podUID),
		Metrics:           m,
		Publish:           o.publishOptions(),
		SharingStrategies: strategies,
		NoDeviceMetadata:  !o.deviceMetadata,
		Health:            o.health,
		MPSRunner:         o.mps.runner(client, o.nodeName, o.mpsHostDriverRoot(), o.kubeletDir),
		BootIDFile:        o.bootIDFile,
		ReferenceWait:     func(msg string) { referenceWait.Store(&msg) },
		ReferencePoll:     o.referencePoll,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for the reference driver's claims
		}
		return err
	}
	defer d.Stop()
	started.Store(d)
	// Start-up (API scheme registration, discovery, the first publication)
	// leaves a few MiB of garbage; give it back now, and again whenever the
	// plugin has been idle for a while.
	debug.FreeOSMemory()
	go releaseMemoryWhenIdle(ctx, 30*time.Second, d.Activity, debug.FreeOSMemory)
	logger.Info("GPU kubelet plugin running", "node", o.nodeName, "gpus", len(be.Inventory.GPUs), "simulated", o.backend.SimulateProfile != "")
	<-ctx.Done()
	logger.Info("Shutting down; prepared claims stay prepared")
	return nil
}

// newClients returns the plugin's client and the one of the background
// device-status writes. They share the connection settings, not the rate
// limiter: the kubelet plugin helper GETs the claim inside every prepare,
// and behind a shared limiter those GETs would wait for status writes.
func newClients(o *options) (mainClient, statusClient kubernetes.Interface, err error) {
	var cfg *rest.Config
	if o.kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("API client config: %w; pass --kubeconfig when running outside a pod", err)
	}
	cfg.UserAgent = "gpu-kubelet-plugin"
	mainCfg := rest.CopyConfig(cfg)
	mainCfg.QPS, mainCfg.Burst = o.kubeAPIQPS, o.kubeAPIBurst
	statusCfg := rest.CopyConfig(cfg)
	statusCfg.QPS, statusCfg.Burst = o.statusQPS, o.statusBurst
	statusCfg.UserAgent = "gpu-kubelet-plugin/device-status"
	if mainClient, err = kubernetes.NewForConfig(mainCfg); err != nil {
		return nil, nil, err
	}
	if statusClient, err = kubernetes.NewForConfig(statusCfg); err != nil {
		return nil, nil, err
	}
	return mainClient, statusClient, nil
}
