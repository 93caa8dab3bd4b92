package driver

import (
	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/health"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/slices"
)

// allocatable lists the devices the node publishes, keyed by device name,
// and the NVML handles the health monitor watches.
func allocatable(pool string, b *Backend) (map[string]*prepare.AllocatableDevice, []health.Device) {
	devices := map[string]*prepare.AllocatableDevice{}
	var watched []health.Device
	for _, g := range b.Inventory.GPUs {
		name := slices.GPUDeviceName(g.Minor)
		devices[name] = &prepare.AllocatableDevice{Name: name, Type: configapi.GpuDeviceType, GPU: g}
		watched = append(watched, health.Device{PoolName: pool, DeviceName: name, NVML: g.Device})
	}
	return devices, watched
}
