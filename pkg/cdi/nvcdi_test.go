package cdi

import (
	"testing"

	cdispec "tags.cncf.io/container-device-interface/specs-go"
)

// The plugin sees the driver under /driver-root; containerd on the host
// must get host paths.
func TestNvcdiPathsAreRewrittenForTheHost(t *testing.T) {
	edits := cdispec.ContainerEdits{
		DeviceNodes: []*cdispec.DeviceNode{{Path: "/dev/nvidia0", HostPath: "/driver-root/dev/nvidia0"}},
		Mounts: []*cdispec.Mount{{
			HostPath:      "/driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20",
			ContainerPath: "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20",
		}},
	}
	got, err := onHost(hostPaths("/driver-root", "/driver-root", "/run/nvidia/driver"), edits)
	if err != nil {
		t.Fatal(err)
	}
	if got.DeviceNodes[0].HostPath != "/run/nvidia/driver/dev/nvidia0" || got.DeviceNodes[0].Path != "/dev/nvidia0" {
		t.Errorf("device node %+v", got.DeviceNodes[0])
	}
	if got.Mounts[0].HostPath != "/run/nvidia/driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20" || got.Mounts[0].ContainerPath != "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.133.20" {
		t.Errorf("mount %+v", got.Mounts[0])
	}
}
