// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// DefaultDriverName is the driver label of NVIDIA's names until Identify
// names the plugin's: the plugin's (and NVIDIA's) default --driver-name.
const DefaultDriverName = "gpu.nvidia.com"

// identity labels NVIDIA's names: its driver puts its node and driver
// name on them.
type identity struct {
	mu           sync.Mutex
	node, driver string
}

func (i *identity) get() (node, driver string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.node, i.driver
}

// Identify sets the node and driver name NVIDIA's names carry as labels
// (metricname.LabelNode, LabelDriver). Before it, the driver label is
// DefaultDriverName and the node label is empty, which Prometheus reads as
// absent; the chart's PodMonitor adds the pod's node as `node` anyway.
func (m *Metrics) Identify(node, driver string) {
	m.id.mu.Lock()
	defer m.id.mu.Unlock()
	m.id.node, m.id.driver = node, driver
}

// nvidiaAliases exports NVIDIA's names for the plugin's request and error
// series (metricname.NVIDIARequests, ...), read from those series at every
// scrape, so that the two can never disagree. Unlike NVIDIA's, the request
// series count failed requests too: they are the plugin's duration
// histograms, which observe every claim.
type nvidiaAliases struct {
	m                                        *Metrics
	requests, duration, prepareE, unprepareE *prometheus.Desc
}

func newNVIDIAAliases(m *Metrics) *nvidiaAliases {
	op := []string{metricname.LabelDriver, metricname.LabelOperation}
	errs := []string{metricname.LabelDriver, metricname.LabelErrorType}
	return &nvidiaAliases{
		m: m,
		requests: prometheus.NewDesc(metricname.NVIDIARequests,
			"Prepare and unprepare requests, failed ones included (NVIDIA's name for the counts of "+metricname.PrepareDuration+" and "+metricname.UnprepareDuration+").", op, nil),
		duration: prometheus.NewDesc(metricname.NVIDIARequestDuration,
			"Duration of prepare and unprepare requests (NVIDIA's name for "+metricname.PrepareDuration+" and "+metricname.UnprepareDuration+").", op, nil),
		prepareE: prometheus.NewDesc(metricname.NVIDIANodePrepareErrors,
			"Claims that failed to prepare (NVIDIA's name for "+metricname.Errors+"{operation=\"prepare\"}).", errs, nil),
		unprepareE: prometheus.NewDesc(metricname.NVIDIANodeUnprepareErrors,
			"Claims that failed to unprepare (NVIDIA's name for "+metricname.Errors+"{operation=\"unprepare\"}).", errs, nil),
	}
}

func (a *nvidiaAliases) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{a.requests, a.duration, a.prepareE, a.unprepareE} {
		ch <- d
	}
}

func (a *nvidiaAliases) Collect(ch chan<- prometheus.Metric) {
	_, driver := a.m.id.get()
	for op, h := range map[string]prometheus.Histogram{
		metricname.OperationPrepare:   a.m.PrepareDuration,
		metricname.OperationUnprepare: a.m.UnprepareDuration,
	} {
		var d dto.Metric
		if err := h.Write(&d); err != nil {
			ch <- prometheus.NewInvalidMetric(a.duration, err)
			continue
		}
		hist := d.GetHistogram()
		buckets := make(map[float64]uint64, len(hist.GetBucket()))
		for _, b := range hist.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		ch <- prometheus.MustNewConstMetric(a.requests, prometheus.CounterValue, float64(hist.GetSampleCount()), driver, op)
		ch <- prometheus.MustNewConstHistogram(a.duration, hist.GetSampleCount(), hist.GetSampleSum(), buckets, driver, op)
	}
	for op, alias := range map[string]struct {
		desc      *prometheus.Desc
		errorType string
	}{
		metricname.OperationPrepare:   {a.prepareE, metricname.ErrorTypePrepareDevices},
		metricname.OperationUnprepare: {a.unprepareE, metricname.ErrorTypeUnprepareDevices},
	} {
		var d dto.Metric
		if err := a.m.Errors.WithLabelValues(op).Write(&d); err != nil {
			ch <- prometheus.NewInvalidMetric(alias.desc, err)
			continue
		}
		ch <- prometheus.MustNewConstMetric(alias.desc, prometheus.CounterValue, d.GetCounter().GetValue(), driver, alias.errorType)
	}
}

// NVIDIADeviceType is NVIDIA's device type (metricname.NVIDIADeviceTypes)
// of a prepared device of kind k: a monitor device is a whole GPU under
// admin access, a dynamic MIG device a MIG device.
func NVIDIADeviceType(k configapi.DeviceKind) string {
	switch k {
	case configapi.WholeGPU, configapi.Monitor:
		return metricname.DeviceTypeGPU
	case configapi.MIG, configapi.DynamicMIG:
		return metricname.DeviceTypeMIG
	case configapi.VFIO:
		return metricname.DeviceTypeVFIO
	}
	return metricname.DeviceTypeUnknown
}

// ObservePreparedDevicesByKind exports the devices held by prepared
// claims, counted by kind when Prometheus scrapes: their sum as
// metricname.PreparedDevices (what ObservePreparedDevices exports; call one
// of the two) and, by NVIDIA's device type, as NVIDIA's
// metricname.NVIDIAPreparedDevices.
func (m *Metrics) ObservePreparedDevicesByKind(count func() map[configapi.DeviceKind]int) {
	m.Registry.MustRegister(&preparedDevices{
		m: m, count: count,
		ours: prometheus.NewDesc(metricname.PreparedDevices, preparedDevicesHelp, nil, nil),
		nvidia: prometheus.NewDesc(metricname.NVIDIAPreparedDevices,
			"Devices held by prepared claims, by device type (NVIDIA's name for "+metricname.PreparedDevices+").",
			[]string{metricname.LabelNode, metricname.LabelDriver, metricname.LabelDeviceType}, nil),
	})
}

const preparedDevicesHelp = "Devices currently held by prepared claims on this node."

type preparedDevices struct {
	m            *Metrics
	count        func() map[configapi.DeviceKind]int
	ours, nvidia *prometheus.Desc
}

func (p *preparedDevices) Describe(ch chan<- *prometheus.Desc) { ch <- p.ours; ch <- p.nvidia }

func (p *preparedDevices) Collect(ch chan<- prometheus.Metric) {
	byType := map[string]int{}
	total := 0
	for k, n := range p.count() {
		byType[NVIDIADeviceType(k)] += n
		total += n
	}
	ch <- prometheus.MustNewConstMetric(p.ours, prometheus.GaugeValue, float64(total))
	node, driver := p.m.id.get()
	for _, t := range metricname.NVIDIADeviceTypes {
		ch <- prometheus.MustNewConstMetric(p.nvidia, prometheus.GaugeValue, float64(byType[t]), node, driver, t)
	}
}
