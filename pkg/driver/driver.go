// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package driver adapts the kubelet plugin helper to the prepare state: it
// starts the helper, publishes the node's ResourceSlices, and forwards the
// kubelet's calls. Everything device-specific lives in other packages.
package driver

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/devicestatus"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// Config is everything the driver needs at start.
type Config struct {
	DriverName   string
	NodeName     string
	Client       kubernetes.Interface
	StatusClient kubernetes.Interface // device-status writes, own rate limiter; Client when nil
	Backend      *backend.Backend
	StateDir     string // checkpoint and simulator files
	CDIDir       string
	PluginDir    string // kubelet plugin data dir (socket)
	RegistrarDir string // kubelet plugin registry
	// RollingUpdateUID enables the helper's rolling updates (the pod UID).
	RollingUpdateUID types.UID
	Metrics          *metrics.Metrics
	// Publish says how GPUs are offered (dynamic MIG, memory fractions);
	// DynamicParents is filled in from the checkpoint at start.
	Publish resourceslices.Options
	// SharingStrategies are the strategies claims may ask for.
	SharingStrategies []configapi.SharingStrategy
	// Health: taint effect and ignored XIDs (health.go).
	Health HealthConfig
	// MPSRunner runs MPS control daemons (pods of their own in a
	// cluster); nil runs them as local processes of Backend.MPSLauncher.
	MPSRunner sharing.Runner
	// MPSShareAcrossNamespaces lets claims of different namespaces share
	// an MPS daemon (sharing.MPS.ShareAcrossNamespaces).
	MPSShareAcrossNamespaces bool
	// BootIDFile holds the node's boot ID; Backend.BootIDFile when empty.
	BootIDFile string
	// NoDeviceMetadata leaves out the device metadata files that are
	// otherwise mounted into containers (metadata.go).
	NoDeviceMetadata bool
	// ReferenceWait is told, while start waits for a checkpoint of
	// NVIDIA's reference driver that it cannot read (reference.go), why:
	// /readyz says it. "" when the wait is over. Optional.
	ReferenceWait func(msg string)
	// ReferencePoll is how often that wait looks again, and how often
	// the reference driver's held claims are looked up in the API;
	// DefaultReferencePoll when zero.
	ReferencePoll time.Duration
	// ReferenceNamespace is the namespace of NVIDIA's release, where its
	// plugin ran the MPS control daemons of its claims as Deployments
	// (reference_undo.go); "" when not told (chart value
	// takeover.nvidiaNamespace).
	ReferenceNamespace string
	// StaleHolderWait bounds how long a prepare call waits for the
	// unprepare of claims the API no longer has that still hold its
	// devices (staleholder.go); DefaultStaleHolderWait when zero,
	// refused at once when negative.
	StaleHolderWait time.Duration
}

// Driver is a running kubelet plugin.
type Driver struct {
	cfg    Config
	helper *kubeletplugin.Helper
	state  *prepare.State
	health *health.Monitor
	status *devicestatus.Writer
	meta   *deviceMetadata
	// ref holds the claims NVIDIA's reference driver left (reference.go)
	// while it holds any; nil on other nodes and once the last is
	// released (wireReference).
	ref atomic.Pointer[referenceTakeover]
	// use is what the kubelet was told about each claim (staleholder.go).
	use *claimUse
	// gpus is every GPU the node publishes: NVML's, and those records
	// hand to a VM, which NVML does not see while they are away.
	gpus *nvdev.Inventory
	// calls counts the kubelet's prepare and unprepare calls.
	calls atomic.Uint64
	// draSocket is the path the helper gave the DRA service's listener
	// (its name depends on rolling updates); the liveness probe dials it.
	draSocket atomic.Pointer[string]
	// published is set once the ResourceSlice controller runs, reconciled
	// once the API server answered for every prepared claim (background.go).
	published, reconciled atomic.Bool
	// publishStarted closes once the first publish has returned, started
	// the controller or not (background.go).
	publishStarted chan struct{}
	// stopBackground ends publishing, the stale-claim check, sharing
	// supervision and the take-over; Stop calls it before it stops the
	// helper, whose stop ends a first publish still waiting for the API
	// server, so that publish sees its context ended, not an error.
	stopBackground context.CancelFunc
	// stopHealth ends the health monitor and healthDone closes when it
	// has: nothing may use NVML after Stop returns, since the caller may
	// shut NVML down (a real driver then frees the event set's memory).
	stopHealth context.CancelFunc
	healthDone chan struct{}
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// Start recovers the checkpoint from local state, serves the kubelet, and
// leaves everything that needs the API server (publishing slices, removing
// claims deleted meanwhile, reporting) to the background: a node that
// boots while the API server is away serves its prepared claims at once.
// First it takes over the claims NVIDIA's reference driver left prepared
// on the node (reference.go); only a checkpoint of it that cannot be read
// makes it wait, returning ctx's error if ctx ends then.
func Start(ctx context.Context, cfg Config) (*Driver, error) {
	logger := klog.FromContext(ctx)
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New()
	}
	if cfg.Health.TaintEffect == "" {
		cfg.Health.TaintEffect = resourceapi.DeviceTaintEffectNoSchedule
	}
	// Before anything is read, swept or published: the claims NVIDIA's
	// reference driver left prepared (reference.go).
	ref, err := readReference(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// Another instance of the plugin may still serve this node (rolling
	// update): wait for its in-flight calls, then own the state.
	fence, err := checkpoint.NewFence(checkpoint.Dir(cfg.StateDir), instanceToken(cfg.RollingUpdateUID))
	if err != nil {
		return nil, err
	}
	releaseFence, err := fence.TakeOver()
	if err != nil {
		return nil, err
	}
	recovered := false
	defer func() {
		if !recovered {
			releaseFence()
		}
	}()
	store, rec, err := checkpoint.Open(checkpoint.Dir(cfg.StateDir))
	if err != nil {
		return nil, err
	}
	for _, f := range rec.MovedAside {
		logger.Info("Moved damaged checkpoint aside; rebuilding from CDI specs", "file", f)
	}
	writer, err := cdi.NewWriter(cfg.CDIDir, cfg.DriverName, cfg.Backend.Edits)
	if err != nil {
		return nil, err
	}
	book := ledger.New(store)
	if ref != nil {
		ref.hold(book, cfg.Backend.Inventory, cfg.Publish.DynamicMIG)
	}
	specs, _ := writer.List() // RecoverLocal reports what it cannot read
	records := tableRecords(book, specs)
	// The GPUs a VM holds are not in NVML's inventory; the checks and
	// the table see them from their records. DeviceTable adds them again
	// to an inventory that has them already: a no-op.
	withVMs, records, unpublishable := passthroughGPUs(cfg.Backend.Inventory, records, cfg.Publish, cfg.NodeName)
	var startProblems []string
	for _, err := range unpublishable {
		logger.Error(err, "GPU a VM holds is not published")
		startProblems = append(startProblems, err.Error())
	}
	if u := cfg.Publish.Passthrough.Unmatched(withVMs); len(u) > 0 {
		// A typo, or a GPU that is lost (off the bus): start either way,
		// so that the node's other GPUs are published and its claims
		// served; the node's Events and the log say which names matched
		// nothing.
		err := fmt.Errorf("--passthrough-gpus names %v, which match no GPU of this node (a typo, or a lost GPU): name GPUs by PCI address (0000:3b:00.0) or minor number, or use 'all' (chart value passthrough.gpus)", u)
		logger.Error(err, "Passthrough GPUs not found")
		startProblems = append(startProblems, err.Error())
	}
	for _, err := range resourceslices.CheckPassthrough(withVMs, cfg.Publish) {
		logger.Info("GPU selected by --passthrough-gpus is not offered for passthrough", "reason", err)
	}
	writer.VFIO = cdi.VFIOOptions{SimulatedDevDir: cfg.Backend.VFIODevDir, Resource: "vfio." + cfg.DriverName}
	table := DeviceTable(withVMs, cfg.Publish, records)
	resources := table.Resources(cfg.NodeName)
	if err := resourceslices.Validate(resources); err != nil {
		return nil, fmt.Errorf("built invalid ResourceSlices: %w", err)
	}
	devices, watched := allocatable(cfg.NodeName, table)
	d := &Driver{cfg: cfg, meta: newDeviceMetadata(cfg.Backend.Inventory, table), gpus: withVMs, use: newClaimUse()}
	d.wireReference(ref)
	d.health = d.newMonitor(watched, book)
	statusGate := d.startStatus(ctx, book) // status_async.go
	d.state = prepare.New(prepare.Config{
		DriverName: cfg.DriverName, PoolName: cfg.NodeName, Devices: devices,
		Ledger: book, CDI: writer, Status: d.status,
		Sharing: sharingConfig(cfg), Fence: fence,
		BootID: readBootID(logger, cmp.Or(cfg.BootIDFile, cfg.Backend.BootIDFile)),
		// Always set, so that a GPU a record holds for a VM is bound back
		// even after passthrough was turned off.
		Passthrough: &prepare.PassthroughConfig{Host: cfg.Backend.VFIO, Lookup: cfg.Backend.NVML.DeviceGetHandleByUUID},
	})
	report := d.state.RecoverLocal(ctx)
	recovered = true
	releaseFence()
	logger.Info("Recovered prepared claims", "kept", report.Kept, "restored", report.Restored, "unrestored", report.Unrestored, "rolledBack", report.RolledBack, "rebuilt", report.Rebuilt, "orphanSpecs", report.OrphanSpecs, "unownedMigDestroyed", report.UnownedMig, "problems", len(report.Problems))
	problems := append(startProblems, report.Problems...)
	for _, f := range rec.MovedAside {
		problems = append(problems, "moved damaged checkpoint file aside: "+filepath.Base(f))
	}
	for uid, version := range rec.Newer {
		problems = append(problems, fmt.Sprintf("claim %s was prepared by a newer driver (checkpoint %s); it is left as it is", uid, version))
	}
	if len(problems) > 0 {
		cfg.Metrics.Errors.WithLabelValues("recovery").Add(float64(len(problems)))
		go reportToNode(ctx, cfg.Client, cfg.NodeName, "PluginStateRecovery", problems)
	}
	// NVIDIA's names of the plugin's series carry its node and driver
	// name (pkg/metrics nvidia.go).
	cfg.Metrics.Identify(cfg.NodeName, cfg.DriverName)
	cfg.Metrics.ObservePreparedDevicesByKind(func() map[configapi.DeviceKind]int { return preparedByKind(book.View()) })
	cfg.Metrics.ObserveUnrestoredClaims(func() int { return len(d.state.Unrestored()) })
	cfg.Metrics.ObserveAllocation(d.allocation)

	for _, dir := range []string{cfg.PluginDir, cfg.RegistrarDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	// The directory is the plugin's own; plugins_registry is the kubelet's.
	if err := os.Chmod(cfg.PluginDir, PluginDirMode); err != nil {
		return nil, fmt.Errorf("restrict %s: %w", cfg.PluginDir, err)
	}
	d.sweepMetadata(ctx) // before the kubelet's calls come in
	d.restoreMetadata(ctx)
	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(cfg.DriverName),
		kubeletplugin.NodeName(cfg.NodeName),
		kubeletplugin.KubeClient(cfg.Client),
		kubeletplugin.PluginDataDirectoryPath(cfg.PluginDir),
		kubeletplugin.RegistrarDirectoryPath(cfg.RegistrarDir),
		kubeletplugin.PluginListener(func(ctx context.Context, path string) (net.Listener, error) {
			d.draSocket.Store(&path)
			return listenUnix(ctx, path)
		}),
		kubeletplugin.RegistrarListener(listenUnix),
		statusGate,
		// Claims are locked per claim and per device in prepare.State.
		kubeletplugin.Serialize(false),
		kubeletplugin.EnableDeviceMetadata(!cfg.NoDeviceMetadata, metadataVersions),
		kubeletplugin.CDIDirectory(cfg.CDIDir),
		kubeletplugin.MetadataFileOps(metadataFileOps(cfg.CDIDir, writer.StagingDir(), cfg.PluginDir)),
	}
	if cfg.RollingUpdateUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(cfg.RollingUpdateUID))
	}
	d.helper, err = kubeletplugin.Start(ctx, d, opts...)
	if err != nil {
		return nil, fmt.Errorf("start kubelet plugin: %w", err)
	}
	cfg.Metrics.ObserveRegistration(d.Registered)
	// The background work ends with Stop, not only with the caller's ctx.
	bg, stopBackground := context.WithCancel(ctx)
	d.stopBackground = stopBackground
	if ref != nil {
		ref.start(bg)
	}
	go d.state.SuperviseSharing(bg, 5*time.Second)
	healthCtx, stopHealth := context.WithCancel(ctx)
	d.stopHealth, d.healthDone = stopHealth, make(chan struct{})
	go func() {
		defer close(d.healthDone)
		d.health.Run(healthCtx)
	}()
	d.publishStarted = make(chan struct{})
	go d.publish(bg, resources, book, watched)
	go d.removeStale(bg)
	return d, nil
}

func sharingConfig(cfg Config) *prepare.SharingConfig {
	allowed := map[configapi.SharingStrategy]bool{}
	for _, s := range cfg.SharingStrategies {
		allowed[s] = true
	}
	return &prepare.SharingConfig{
		TimeSlicer: cfg.Backend.TimeSlicer,
		MPS:        &sharing.MPS{Root: filepath.Join(cfg.StateDir, "mps"), Runner: mpsRunner(cfg), ShareAcrossNamespaces: cfg.MPSShareAcrossNamespaces},
		Allowed:    allowed,
		NodeName:   cfg.NodeName,
	}
}

// Stop stops serving and waits for the health monitor to let go of NVML;
// prepared claims stay prepared.
func (d *Driver) Stop() {
	d.stopBackground()
	d.helper.Stop()
	d.stopHealth()
	<-d.healthDone
}

// Activity counts the kubelet's prepare and unprepare calls so far.
func (d *Driver) Activity() uint64 { return d.calls.Load() }

// Registered reports whether the kubelet confirmed the plugin's
// registration (NotifyRegistrationStatus with PluginRegistered).
func (d *Driver) Registered() bool {
	st := d.helper.RegistrationStatus()
	return st != nil && st.PluginRegistered
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	if len(claims) > 0 { // the liveness probe's empty calls are not activity
		d.calls.Add(1)
	}
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	call, deadline := d.use.begin(), d.staleDeadline(ctx)
	for _, claim := range claims {
		if devices, ok := d.ref.Load().prepare(claim); ok {
			out[claim.UID] = kubeletplugin.PrepareResult{Devices: devices}
			continue
		}
		start := time.Now()
		devices, err := d.prepareClaim(ctx, claim, deadline)
		d.cfg.Metrics.PrepareDuration.Observe(time.Since(start).Seconds())
		if err != nil {
			d.cfg.Metrics.Errors.WithLabelValues("prepare").Inc()
			err = fmt.Errorf("prepare claim %s/%s: %w", claim.Namespace, claim.Name, err)
		} else if rec, ok := d.state.Ledger.Get(claim.UID); ok {
			d.meta.attach(devices, rec.Devices)
		}
		out[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
	}
	d.use.finish(call, claims, out)
	return out, nil
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	d.calls.Add(1)
	out := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		if ok, err := d.ref.Load().unprepare(ctx, claim); ok {
			out[claim.UID] = err
			continue
		}
		start := time.Now()
		err := d.state.Unprepare(ctx, claim)
		d.cfg.Metrics.UnprepareDuration.Observe(time.Since(start).Seconds())
		if err != nil {
			d.cfg.Metrics.Errors.WithLabelValues("unprepare").Inc()
		} else {
			d.use.forget(claim.UID) // wakes prepares waiting for it
		}
		out[claim.UID] = err
	}
	return out, nil
}

// HandleError implements kubeletplugin.DRAPlugin. Publishing errors are
// recoverable (the controller retries); they are logged and counted.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	d.cfg.Metrics.Errors.WithLabelValues("background").Inc()
	runtime.HandleErrorWithContext(ctx, err, msg)
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return d.health.Watch(ctx, reports)
}

func mpsRunner(cfg Config) sharing.Runner {
	if cfg.MPSRunner != nil {
		return cfg.MPSRunner
	}
	return sharing.ProcessRunner{Launcher: cfg.Backend.MPSLauncher}
}
