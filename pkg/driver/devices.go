// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"fmt"
	"slices"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/deviceattr"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/mig"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/nvdev"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// DeviceTable is what a node offers: its inventory, published with the
// node's options, where what the checkpoint's records hold stays offered
// while they hold it (records of every state and of newer drivers:
// checkpoint.Store.Owning). GPUs on which they hold MIG devices this driver
// created stay dynamically partitioned (rather than being taken for an
// admin's static MIG layout) and keep publishing the profiles of those
// devices even where --mig-profiles no longer lists them or the
// DynamicMIG gate is off; a held monitor device stays published with
// monitor devices turned off, a VM's GPU keeps its vfio device with
// passthrough turned off, and a GPU with held memory shares stays
// shareable with memory fractions turned off, so that their claims keep
// their devices, the scheduler keeps counting what they occupy, and they
// can be unprepared (issue 47). A dynamic MIG
// device held under the name it had before names carried the profile ID
// is published under that name too (Options.HeldLegacyMigNames). The
// plugin and --print-slices both use it.
func DeviceTable(inv *nvdev.Inventory, o resourceslices.Options, records []checkpoint.PreparedClaim) resourceslices.Table {
	inv = WithPassthroughGPUs(inv, records)
	o.DynamicParents = map[string]bool{}
	o.HeldMigProfiles = map[string][]string{}
	o.HeldMonitors = map[string]bool{}
	o.HeldLegacyMigNames = map[string]string{}
	o.HeldPassthrough = map[string]bool{}
	o.HeldShares = map[string]bool{}
	for _, rec := range records {
		for _, d := range rec.Devices {
			if deviceattr.IsMonitorDeviceName(d.Device) {
				o.HeldMonitors[d.UUID] = true
			}
			if d.Vfio != nil {
				o.HeldPassthrough[d.UUID] = true
			}
			if d.ShareID != "" && d.Mig == nil && d.Vfio == nil {
				o.HeldShares[d.UUID] = true
			}
			if d.Mig != nil && d.Mig.Dynamic {
				o.DynamicParents[d.Mig.ParentUUID] = true
				o.HeldMigProfiles[d.Mig.ParentUUID] = append(o.HeldMigProfiles[d.Mig.ParentUUID], d.Mig.Profile)
				if n, ok := deviceattr.ParseMigDeviceName(d.Device); ok && n.GIProfileID < 0 {
					o.HeldLegacyMigNames[d.Device] = d.Mig.ParentUUID
				}
			}
		}
	}
	return resourceslices.NewTable(inv, o)
}

// WithPassthroughGPUs is inv plus the GPUs that records hand to a VM and
// that NVML therefore does not see (bound to vfio-pci), as NVML described
// them before: they stay published, with their other devices, so that the
// claim can be unprepared and the GPU used again once it is back. Such a
// GPU has no NVML handle until then (devkind's passthrough Release and the health
// monitor look it up). inv itself is not changed.
func WithPassthroughGPUs(inv *nvdev.Inventory, records []checkpoint.PreparedClaim) *nvdev.Inventory {
	seen := map[string]bool{}
	for _, g := range inv.GPUs {
		seen[g.UUID] = true
	}
	out := *inv
	out.GPUs = slices.Clone(inv.GPUs)
	for _, rec := range records {
		for _, d := range rec.Devices {
			if d.Vfio == nil || d.Vfio.GPU == nil || seen[d.Vfio.GPU.UUID] {
				continue
			}
			g := *d.Vfio.GPU
			g.Device = nil
			seen[g.UUID] = true
			out.GPUs = append(out.GPUs, &g)
		}
	}
	slices.SortStableFunc(out.GPUs, func(a, b *nvdev.GPU) int { return a.Minor - b.Minor })
	return &out
}

// passthroughGPUs is WithPassthroughGPUs for a node that must publish: a
// GPU a record holds for a VM is published from the record only where
// that makes a valid table, because a record written before nvidia.ko was
// reloaded can carry a minor another GPU has now, and a damaged one a
// name no attribute can carry. Such a GPU is left out (and said why); its
// claim keeps it all the same (the ledger holds it by UUID) and is
// unprepared from its record.
//
// It returns the inventory with the VMs' GPUs, the records the table is to
// be built from (without the devices left out) and the problems.
func passthroughGPUs(inv *nvdev.Inventory, records []checkpoint.PreparedClaim, o resourceslices.Options, node string) (*nvdev.Inventory, []checkpoint.PreparedClaim, []error) {
	minors := map[int]string{}
	for _, g := range inv.GPUs {
		minors[g.Minor] = g.UUID
	}
	var problems []error
	kept := records[:0:0]
	for _, rec := range records {
		keep := rec
		keep.Devices = nil
		for _, d := range rec.Devices {
			if d.Vfio != nil && d.Vfio.GPU != nil && minors[d.Vfio.GPU.Minor] != d.Vfio.GPU.UUID {
				if err := publishable(inv, d.Vfio.GPU, minors, o, node); err != nil {
					problems = append(problems, fmt.Errorf("claim %s/%s: %w", rec.Namespace, rec.Name, err))
					continue
				}
				minors[d.Vfio.GPU.Minor] = d.Vfio.GPU.UUID
			}
			keep.Devices = append(keep.Devices, d)
		}
		kept = append(kept, keep)
	}
	return WithPassthroughGPUs(inv, kept), kept, problems
}

// publishable checks a VM's GPU, as its record describes it, against the
// GPUs published already and alone in a table of its own.
func publishable(inv *nvdev.Inventory, g *nvdev.GPU, minors map[int]string, o resourceslices.Options, node string) error {
	if other, taken := minors[g.Minor]; taken {
		return fmt.Errorf("GPU %s, bound to vfio-pci for a VM, is recorded with minor %d, which GPU %s has now (nvidia.ko was reloaded while it was away); it is published again once unprepare binds it back", g.UUID, g.Minor, other)
	}
	alone := *inv
	c := *g
	alone.GPUs = []*nvdev.GPU{&c}
	if err := resourceslices.Validate(resourceslices.NewTable(&alone, o).Resources(node)); err != nil {
		return fmt.Errorf("GPU %s, bound to vfio-pci for a VM, cannot be published from its record: %w", g.UUID, err)
	}
	return nil
}

// tableRecords are the records the device table keeps offered: every
// owning record (checkpoint.Store.Owning), and the record a CDI spec
// carries for a claim whose checkpoint record was lost, which start
// rebuilds from it (prepare.RecoverLocal): built before that rebuild, the
// table would otherwise take the claim's MIG device for an admin's static
// one and offer its hardware again.
func tableRecords(book *ledger.Ledger, specs []cdi.ClaimSpec) []checkpoint.PreparedClaim {
	view := book.View()
	for _, spec := range specs {
		if _, ok := book.Get(spec.UID); ok || book.Newer(spec.UID) {
			continue
		}
		if rec, ok := checkpoint.FromSpecAnnotations(spec.UID, spec.Annotations); ok && rec.State == checkpoint.PrepareCompleted {
			view = view.With(rec)
		}
	}
	return view.Records()
}

// PreviewDeviceTable is DeviceTable for a node's state directory, read
// without changing anything in it.
func PreviewDeviceTable(inv *nvdev.Inventory, o resourceslices.Options, stateDir string) (resourceslices.Table, error) {
	records, err := checkpoint.ReadOnly(checkpoint.Dir(stateDir))
	if err != nil {
		return resourceslices.Table{}, fmt.Errorf("read the checkpoint: %w", err)
	}
	return DeviceTable(inv, o, records), nil
}

// allocatable maps the table's entries, and its dynamic MIG devices under
// their older names (Table.Aliases: claims allocated before the rename),
// to what prepare needs, keyed by device name, and lists the NVML handles
// the health monitor watches. It makes no decision of its own: the table
// made them.
func allocatable(pool string, table resourceslices.Table) (map[string]*prepare.AllocatableDevice, []health.Device) {
	devices := make(map[string]*prepare.AllocatableDevice, len(table.Entries))
	watched := make([]health.Device, 0, len(table.Entries))
	for _, e := range table.Entries {
		d := allocatableDevice(e)
		devices[d.Name] = d
		watched = append(watched, d.Behavior().Watch(pool, d))
	}
	for _, e := range table.Aliases() {
		devices[e.Device.Name] = allocatableDevice(e) // watched under its current name
	}
	return devices, watched
}

// allocatableDevice is what prepare needs of one entry. The table leaves
// the placement empty on devices that are no MIG device.
func allocatableDevice(e resourceslices.Entry) *prepare.AllocatableDevice {
	return &prepare.AllocatableDevice{
		Name: e.Device.Name, Kind: e.Kind, GPU: e.GPU, Partitionable: e.Partitionable,
		StaticUUID: e.StaticUUID, GIID: e.GIID, CIID: e.CIID, TimeSlicedShares: e.TimeSlicedShares,
		Placement: mig.Placement{Profile: e.Profile, Start: e.Start, Size: e.Size},
	}
}
