// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metrics exposes the plugin's Prometheus metrics and its liveness
// endpoint.
package metrics

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/klog/v2"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/version"
)

// Metrics holds the driver's collectors in their own registry. Their names
// are constants in pkg/metrics/metricname.
type Metrics struct {
	Registry          *prometheus.Registry
	PrepareDuration   prometheus.Histogram
	UnprepareDuration prometheus.Histogram
	Errors            *prometheus.CounterVec
	// DeviceHealthy is 1 for a healthy published device, 0 for an
	// unhealthy one (pkg/health); XIDEvents counts NVML XID events, the
	// ignored application XIDs included.
	DeviceHealthy *prometheus.GaugeVec
	XIDEvents     *prometheus.CounterVec

	// id labels NVIDIA's names of the same series (nvidia.go).
	id identity
}

// New registers the collectors.
func New() *Metrics {
	buckets := []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		PrepareDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: metricname.PrepareDuration, Help: "Time to prepare one ResourceClaim.", Buckets: buckets,
		}),
		UnprepareDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: metricname.UnprepareDuration, Help: "Time to unprepare one ResourceClaim.", Buckets: buckets,
		}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricname.Errors, Help: "Failed operations by operation (prepare, unprepare, background).",
		}, []string{metricname.LabelOperation}),
		DeviceHealthy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricname.DeviceHealthy, Help: "1 if the published device is healthy, 0 if it is unhealthy (and tainted in its ResourceSlice).",
		}, []string{metricname.LabelDevice, metricname.LabelUUID}),
		XIDEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricname.XIDEvents, Help: "NVML XID critical-error events received, by XID (application XIDs that are ignored included).",
		}, []string{metricname.LabelXID}),
	}
	// Every operation's count starts at 0: rate() and increase() only see
	// an increment from an earlier sample, so a series born at 1 would
	// hide the first error from the dashboard and the alert rules.
	for _, op := range []string{metricname.OperationPrepare, metricname.OperationUnprepare, metricname.OperationBackground, metricname.OperationRecovery} {
		m.Errors.WithLabelValues(op)
	}
	// GPUs that discovery left out because NVML could not describe them
	// (the plugin keeps serving the others); counted by pkg/nvdev.
	discoveryFailures := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: metricname.DiscoveryFailedGPUs, Help: "GPUs left out at discovery because NVML could not describe them.",
	}, func() float64 { return float64(nvdev.FailedGPUsTotal()) })
	m.id.driver = DefaultDriverName
	m.Registry.MustRegister(m.PrepareDuration, m.UnprepareDuration, m.Errors, m.DeviceHealthy, m.XIDEvents, discoveryFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo(version.Get()),
		newNVIDIAAliases(m))
	return m
}

// ObservePreparedDevices exports the number of devices held by prepared
// claims, computed when Prometheus scrapes rather than on every prepare.
// ObservePreparedDevicesByKind (nvidia.go) exports it too, and NVIDIA's
// name of it by device type.
func (m *Metrics) ObservePreparedDevices(count func() int) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricname.PreparedDevices, Help: preparedDevicesHelp,
	}, func() float64 { return float64(count()) }))
}

// ObserveUnrestoredClaims exports how many prepared claims could not be
// restored after a reboot (their prepare fails, and their pods get an
// event saying why).
func (m *Metrics) ObserveUnrestoredClaims(count func() int) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricname.UnrestoredClaims, Help: "Prepared claims whose devices could not be restored after a node reboot.",
	}, func() float64 { return float64(count()) }))
}

// ObserveRegistration exports whether the kubelet has registered the
// plugin (its last NotifyRegistrationStatus said so), read when Prometheus
// scrapes. `gpudra diagnose` reads it where the kubelet's own
// plugin_manager_total_plugins cannot be reached.
func (m *Metrics) ObserveRegistration(registered func() bool) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: metricname.KubeletRegistered, Help: "1 when the kubelet has confirmed the plugin's registration, else 0.",
	}, func() float64 {
		if registered() {
			return 1
		}
		return 0
	}))
}

// Serve runs /metrics, /healthz and /readyz on addr until ctx ends. live
// reports whether the plugin is healthy (a restart would fix a failure),
// ready whether it serves everything it promises (a wait would).
func (m *Metrics) Serve(ctx context.Context, addr string, live, ready func() error) (net.Addr, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.Handle("/healthz", probe(live))
	mux.Handle("/readyz", probe(ready))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			// /healthz is served here too, so the kubelet's liveness probe
			// fails from now on and restarts the container.
			klog.FromContext(ctx).Error(err, "Serving metrics and liveness stopped", "address", l.Addr().String())
		}
	}()
	return l.Addr(), nil
}

// probe answers 200 "ok" while check passes, else 503 with its error.
func probe(check func() error) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}
