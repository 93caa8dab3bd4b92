package driver

import (
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/slices"
)

// dynamicParents lists GPUs on which the checkpoint holds MIG devices this
// driver created, so a restart keeps treating them as dynamically
// partitioned rather than as an admin's static MIG layout.
func dynamicParents(store *checkpoint.Store) map[string]bool {
	out := map[string]bool{}
	for _, rec := range store.List() {
		for _, d := range rec.Devices {
			if d.Mig != nil && d.Mig.Dynamic {
				out[d.Mig.ParentUUID] = true
			}
		}
	}
	return out
}

// allocatable lists the devices the node publishes, keyed by device name
// (the same decisions as slices.Build), and the NVML handles the health
// monitor watches.
func allocatable(pool string, inv *nvdev.Inventory, o slices.Options) (map[string]*prepare.AllocatableDevice, []health.Device) {
	devices := map[string]*prepare.AllocatableDevice{}
	var watched []health.Device
	add := func(d *prepare.AllocatableDevice) {
		devices[d.Name] = d
		w := health.Device{PoolName: pool, DeviceName: d.Name, UUID: d.GPU.UUID, NVML: d.GPU.Device, MIG: d.Kind != prepare.WholeGPU}
		if d.Kind == prepare.StaticMig {
			w.Instance = &[2]uint32{uint32(d.GIID), uint32(d.CIID)}
		}
		watched = append(watched, w)
	}
	for _, g := range inv.GPUs {
		mode := slices.ModeOf(g, o)
		if slices.WholeGPUPublished(g, mode) {
			add(&prepare.AllocatableDevice{Name: slices.GPUDeviceName(g.Minor), Kind: prepare.WholeGPU, GPU: g, Partitionable: mode == slices.DynamicMIG})
		}
		switch mode {
		case slices.StaticMIG:
			for _, m := range g.MigDevices {
				add(&prepare.AllocatableDevice{
					Name: slices.MigDeviceName(g.Minor, m.Profile.Name, m.Placement.Start), Kind: prepare.StaticMig, GPU: g,
					Placement:  mig.Placement{Profile: m.Profile, Start: m.Placement.Start, Size: m.Placement.Size},
					StaticUUID: m.UUID, GIID: m.GIID, CIID: m.CIID,
				})
			}
		case slices.DynamicMIG:
			for _, p := range g.MigProfiles {
				for _, pl := range p.Placements {
					add(&prepare.AllocatableDevice{
						Name: slices.MigDeviceName(g.Minor, p.Name, pl.Start), Kind: prepare.DynamicMig, GPU: g,
						Placement: mig.Placement{Profile: p, Start: pl.Start, Size: pl.Size},
					})
				}
			}
		}
	}
	return devices, watched
}
