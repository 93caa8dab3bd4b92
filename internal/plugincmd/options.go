// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/featuregate"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// The plugin's flags as parsed (commandFor fills them in), and complete,
// which checks them and derives what the flags imply.

type options struct {
	driverName   string
	nodeName     string
	podUID       string
	kubeconfig   string
	kubeAPIQPS   float32
	kubeAPIBurst int
	statusQPS    float32
	statusBurst  int
	kubeletDir   string
	stateDir     string
	cdiRoot      string
	httpEndpoint string
	printSlices  bool
	gates        featuregate.MutableFeatureGate
	backend      backend.Options
	fractional   bool
	// shares are --consumable-shares* (shares.go).
	shares sharesOptions
	// deviceMetadata writes per-request device metadata files
	// (KEP-5304) that the kubelet mounts into containers.
	deviceMetadata bool
	// monitorDevices publishes each GPU's admin-access monitor device.
	monitorDevices bool
	fractionalOn   []int
	strategies     []string
	taintEffect    string
	ignoredXIDs    []string
	bootIDFile     string
	health         driver.HealthConfig
	mps            mpsOptions
	// migProfiles limits dynamic MIG to these profiles (migprofiles.go).
	migProfiles []string
	// passthroughGPUs is --passthrough-gpus, parsed into passthrough.
	passthroughGPUs []string
	passthrough     resourceslices.PassthroughSelector
	// nodeProfiles is --simulate-node-profiles (nodeprofiles.go).
	nodeProfiles []string
	// nvmlRetry and nvmlRetryMax pace the wait for NVML (waitnvml.go).
	nvmlRetry, nvmlRetryMax time.Duration
	// referenceNamespace is NVIDIA's release's namespace, for the
	// take-over of its MPS claims (driver.Config.ReferenceNamespace).
	referenceNamespace string

	// Tests replace these; nil means the real ones.
	openBackend func(backend.Options) (*backend.Backend, error)
	clients     func() (kubernetes.Interface, kubernetes.Interface, error)
	// referencePoll replaces driver.DefaultReferencePoll in tests.
	referencePoll time.Duration
}

// DynamicMIG offers MIG-capable GPUs whose MIG mode changes without a reset
// as partitionable devices; MIG devices are then created at prepare time.
const DynamicMIG featuregate.Feature = "DynamicMIG"

func newFeatureGates() featuregate.MutableFeatureGate {
	g := featuregate.NewFeatureGate()
	if err := g.Add(map[featuregate.Feature]featuregate.FeatureSpec{
		DynamicMIG: {Default: true, PreRelease: featuregate.Beta},
	}); err != nil {
		panic(err) // only on a programming error in the table above
	}
	return g
}

func parseStrategies(names []string) ([]configapi.SharingStrategy, error) {
	var out []configapi.SharingStrategy
	for _, n := range names {
		switch s := configapi.SharingStrategy(n); s {
		case configapi.TimeSlicingStrategy, configapi.MpsStrategy:
			out = append(out, s)
		default:
			return nil, fmt.Errorf("--sharing-strategies: unknown strategy %q; use TimeSlicing and/or MPS", n)
		}
	}
	return out, nil
}

func (o *options) complete() error {
	if o.nodeName == "" {
		return fmt.Errorf("--node-name is required (or set NODE_NAME)")
	}
	if o.stateDir == "" {
		o.stateDir = filepath.Join(o.kubeletDir, "plugins", o.driverName)
	}
	o.backend.NodeName = o.nodeName
	profile, err := nodeProfile(o.nodeProfiles, o.nodeName, o.backend.SimulateProfile)
	if err != nil {
		return err
	}
	o.backend.SimulateProfile = profile
	o.backend.StateDir = o.stateDir
	o.mps.daemonDefaults = o.backend.SimulateProfile != "" && o.backend.SimulateNodeMode == backend.NodeModeDevices
	switch e := resourceapi.DeviceTaintEffect(o.taintEffect); e {
	case resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute:
		o.health.TaintEffect = e
	default:
		return fmt.Errorf("--health-taint-effect: %q is not an effect; use NoSchedule or NoExecute", o.taintEffect)
	}
	xids, err := health.ParseXIDs("--health-ignored-xids", o.ignoredXIDs)
	if err != nil {
		return err
	}
	o.health.IgnoredXIDs = xids
	if o.migProfiles, err = parseMigProfiles(o.migProfiles); err != nil {
		return err
	}
	if o.passthrough, err = parsePassthrough(o.passthroughGPUs); err != nil {
		return err
	}
	if err := o.shares.complete(o.fractional, o.fractionalOn); err != nil {
		return err
	}
	if o.nvmlRetry <= 0 || o.nvmlRetryMax < o.nvmlRetry {
		return fmt.Errorf("--nvml-retry-interval %v, --nvml-retry-max-interval %v: want 0 < interval <= max interval", o.nvmlRetry, o.nvmlRetryMax)
	}
	return nil
}

// publishOptions are the flags that shape what the node offers.
func (o *options) publishOptions() resourceslices.Options {
	return resourceslices.Options{DynamicMIG: o.gates.Enabled(DynamicMIG), FractionalMemory: o.fractional, FractionalGPUs: o.fractionalOn, ConsumableShares: o.shares.parsed,
		NoMonitorDevices: !o.monitorDevices, MigProfiles: o.migProfiles, Passthrough: o.passthrough}
}

// splitEnv is a list flag's default from a comma-separated variable.
func splitEnv(name string) []string {
	if v := os.Getenv(name); v != "" {
		return strings.Split(v, ",")
	}
	return nil
}

// envOr returns the environment variable's value, or def when it is unset
// or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
