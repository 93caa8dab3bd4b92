// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
)

// GPUAllocation is what prepared claims hold on one GPU.
type GPUAllocation struct {
	// GPU is the GPU's minor number; UUID and Model identify it.
	GPU, UUID, Model string
	// State is one of metricname.States.
	State string
	// Claims counts the claims that hold the GPU (or part of it), by
	// metricname.Modes.
	Claims map[string]int
	// MigSlices is the GPU's memory slices, 0 when it is not MIG capable
	// (then no MIG series is exported); MigSlicesInUse those that MIG
	// devices held by claims occupy.
	MigSlices, MigSlicesInUse int
	// MemoryBytes is the GPU's memory; MemoryAllocatedBytes what claims
	// hold of it: all of it when used whole (shared by time-slicing or
	// MPS included), else the sum of their MIG devices and memory shares.
	MemoryBytes, MemoryAllocatedBytes int64
}

// allocationCollector reads the allocation at scrape time, so that the
// exported values can never drift from the records they come from.
type allocationCollector struct {
	read                                                    func() []GPUAllocation
	state, claims, migSlices, migInUse, memory, memoryAlloc *prometheus.Desc
}

// ObserveAllocation exports, per GPU, what prepared claims hold on it,
// asking read at every scrape.
func (m *Metrics) ObserveAllocation(read func() []GPUAllocation) {
	gpu := []string{metricname.LabelGPU, metricname.LabelUUID, metricname.LabelModel}
	with := func(l string) []string { return append(append([]string{}, gpu...), l) }
	m.Registry.MustRegister(&allocationCollector{
		read: read,
		state: prometheus.NewDesc(metricname.GPUState,
			"1 for the GPU's current use (state: free, whole, mig, shared, fraction), 0 for the others.", with(metricname.LabelState), nil),
		claims: prometheus.NewDesc(metricname.GPUPreparedClaims,
			"Prepared claims holding the GPU or part of it, by mode (whole, mig, time-slicing, mps, fraction).", with(metricname.LabelMode), nil),
		migSlices: prometheus.NewDesc(metricname.GPUMigSlices,
			"MIG memory slices of a MIG-capable GPU.", gpu, nil),
		migInUse: prometheus.NewDesc(metricname.GPUMigSlicesInUse,
			"MIG memory slices occupied by MIG devices that prepared claims hold.", gpu, nil),
		memory: prometheus.NewDesc(metricname.GPUMemoryBytes,
			"Memory of the GPU.", gpu, nil),
		memoryAlloc: prometheus.NewDesc(metricname.GPUMemoryAllocatedBytes,
			"Memory of the GPU held by prepared claims: all of it when used whole, else their MIG devices' and memory shares'.", gpu, nil),
	})
}

func (c *allocationCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.claims, c.migSlices, c.migInUse, c.memory, c.memoryAlloc} {
		ch <- d
	}
}

func (c *allocationCollector) Collect(ch chan<- prometheus.Metric) {
	for _, a := range c.read() {
		gauge := func(d *prometheus.Desc, v float64, extra ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{a.GPU, a.UUID, a.Model}, extra...)...)
		}
		for _, s := range metricname.States {
			v := 0.0
			if s == a.State {
				v = 1
			}
			gauge(c.state, v, s)
		}
		for _, mode := range metricname.Modes {
			gauge(c.claims, float64(a.Claims[mode]), mode)
		}
		if a.MigSlices > 0 {
			gauge(c.migSlices, float64(a.MigSlices))
			gauge(c.migInUse, float64(a.MigSlicesInUse))
		}
		gauge(c.memory, float64(a.MemoryBytes))
		gauge(c.memoryAlloc, float64(a.MemoryAllocatedBytes))
	}
}
