// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"runtime"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// A kill, for the property test: the plugin process dies at a point of
// its work and everything it held in memory is gone; what it wrote to disk
// and did to the GPUs stays. The test runs each operation in a goroutine
// and ends that goroutine with runtime.Goexit at the chosen point: deferred
// unlocks run, nothing else of the operation does, and the test then
// throws the State away and starts a new one over the same directories
// and GPUs, as the kubelet restarts a killed plugin.
//
// Kill points sit before and after every change to a GPU (MIG mode, GPU
// and compute instances, time slice) and before every CDI spec write, so a
// kill lands between any two steps that leave a trace.

// killer counts kill points and ends the goroutine at the armed one.
type killer struct {
	mu     sync.Mutex
	armed  int // the point that kills, counting down; 0: none
	killed bool
	points int // points passed, for the report
	// fifos are the FIFOs the test made, which a blocked start is let go
	// from (runWithin).
	fifos []string
}

func (k *killer) arm(at int) {
	k.mu.Lock()
	k.armed, k.killed = at, false
	k.mu.Unlock()
}

func (k *killer) disarm() (killed bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	// The kill is reported once: a run after it that nobody armed was
	// not killed (a stale flag kept a start "killed" for ever).
	killed = k.killed
	k.armed, k.killed = 0, false
	return killed
}

func (k *killer) point() {
	k.mu.Lock()
	k.points++
	if k.armed > 0 {
		k.armed--
		if k.armed == 0 {
			k.killed = true
			k.mu.Unlock()
			runtime.Goexit()
		}
	}
	k.mu.Unlock()
}

// run runs op as the plugin would, and reports whether it was killed.
func (k *killer) run(op func()) (killed bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		op()
	}()
	<-done
	return k.disarm()
}

type killDevice struct {
	nvml.Device
	k *killer
}

func (d killDevice) SetMigMode(mode int) (nvml.Return, nvml.Return) {
	d.k.point()
	r1, r2 := d.Device.SetMigMode(mode)
	d.k.point()
	return r1, r2
}

func (d killDevice) CreateGpuInstanceWithPlacement(info *nvml.GpuInstanceProfileInfo, p *nvml.GpuInstancePlacement) (nvml.GpuInstance, nvml.Return) {
	d.k.point()
	gi, ret := d.Device.CreateGpuInstanceWithPlacement(info, p)
	d.k.point()
	if ret != nvml.SUCCESS {
		return gi, ret
	}
	return killGI{gi, d.k}, ret
}

func (d killDevice) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	gi, ret := d.Device.GetGpuInstanceById(id)
	if ret != nvml.SUCCESS {
		return gi, ret
	}
	return killGI{gi, d.k}, ret
}

type killGI struct {
	nvml.GpuInstance
	k *killer
}

func (g killGI) CreateComputeInstance(info *nvml.ComputeInstanceProfileInfo) (nvml.ComputeInstance, nvml.Return) {
	g.k.point()
	ci, ret := g.GpuInstance.CreateComputeInstance(info)
	g.k.point()
	if ret != nvml.SUCCESS {
		return ci, ret
	}
	return killCI{ci, g.k}, ret
}

func (g killGI) GetComputeInstanceById(id int) (nvml.ComputeInstance, nvml.Return) {
	ci, ret := g.GpuInstance.GetComputeInstanceById(id)
	if ret != nvml.SUCCESS {
		return ci, ret
	}
	return killCI{ci, g.k}, ret
}

func (g killGI) Destroy() nvml.Return {
	g.k.point()
	ret := g.GpuInstance.Destroy()
	g.k.point()
	return ret
}

type killCI struct {
	nvml.ComputeInstance
	k *killer
}

func (c killCI) Destroy() nvml.Return {
	c.k.point()
	ret := c.ComputeInstance.Destroy()
	c.k.point()
	return ret
}

type killSlicer struct {
	sharing.TimeSlicer
	k *killer
}

func (s killSlicer) SetTimeSlice(uuid string, interval configapi.TimeSliceInterval) error {
	s.k.point()
	err := s.TimeSlicer.SetTimeSlice(uuid, interval)
	s.k.point()
	return err
}

type killEdits struct {
	cdi.Edits
	k *killer
}

func (e killEdits) ForClaim(devices []cdi.Device) (cdispec.ContainerEdits, error) {
	e.k.point()
	return e.Edits.ForClaim(devices)
}
