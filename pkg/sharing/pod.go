// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Labels and annotations of daemon pods. A daemon pod's node is its
// spec.nodeName, which the admission policy pins to the node of the token
// that creates it and which no update can change; no label claims a node
// (earlier versions had gpu.nvidia.com/mps-node, a hash of the node name
// that the policy could not check, so any node's token could claim any
// node: issue 55).
const (
	DaemonComponentLabel = "app.kubernetes.io/component"
	DaemonComponent      = "mps-control-daemon"
	// DaemonDeviceAnnotation holds the device UUID (a MIG UUID of the old
	// form has slashes, which no label value may).
	DaemonDeviceAnnotation = "gpu.nvidia.com/mps-device"
	// DaemonNodeAnnotation holds the node name, for people reading the pod.
	DaemonNodeAnnotation = "gpu.nvidia.com/mps-node-name"
)

// DefaultPriorityClassName is the PriorityClass of daemon pods when
// PodRunner.PriorityClassName is empty (chart value
// sharing.mps.priorityClassName). A daemon pod always names its class: one
// that names none gets, from Priority admission, whatever class a cluster
// marks globalDefault, which the admission policy cannot foresee (issue
// 55). This one exists in every cluster with a fixed value, and suits a
// node's daemon whose end fails every MPS client of its device: the
// kubelet's node-pressure eviction passes over a pod of a system-critical
// priority, and no scheduler preemption picks it.
const DefaultPriorityClassName = "system-node-critical"

// PodRunner runs each MPS control daemon in a pod of its own on this node,
// in the plugin's namespace, so that the daemon outlives the plugin's
// container and pod: a restart, crash or rolling update of the plugin
// kills every process in its container's cgroup, daemons included
// (hostPID and setsid do not change that), and the plugin's memory limit
// would cover the daemons. NVIDIA's DRA driver does the same with a
// Deployment per claim (k8s-dra-driver-gpu
// templates/mps-control-daemon.tmpl.yaml). A bare pod with nodeName needs
// neither the scheduler nor a Deployment controller nor apps RBAC; the
// kubelet restarts its container, and the plugin's supervisor recreates a
// pod that is deleted or fails. The pod has no owner: deleting it is the
// plugin's job when the device's last claim is unprepared (or, after a
// crash, its start-up recovery's).
type PodRunner struct {
	Client    kubernetes.Interface
	Namespace string
	NodeName  string
	// Image is the plugin's own image; it holds the daemon program and the
	// simulated stand-in.
	Image string
	// HostDriverRoot is the driver root on the host; empty when simulating,
	// which runs the stand-in without privileges.
	HostDriverRoot string
	// DaemonDefaults sets the limits of the claim that starts a daemon as
	// the daemon's defaults (Daemon.Defaults). Off on real GPUs, where
	// claims sharing a daemon keep their own limits in their clients'
	// environment only; on in the simulator's devices node mode, where no
	// MPS server (it needs a GPU) could report a client's limits and the
	// daemon's defaults show what the claim asked for.
	DaemonDefaults bool
	// PriorityClassName is daemon pods' PriorityClass;
	// DefaultPriorityClassName when empty.
	PriorityClassName string
	// ShmSize bounds the /dev/shm that a daemon and its clients share
	// (--mps-shm-size, chart value sharing.mps.shmSize); DefaultShmSize
	// when zero. It is an emptyDir of the daemon pod in memory with this
	// sizeLimit: the kubelet mounts it as a tmpfs of that size, so a write
	// past it fails with ENOSPC instead of filling the node's disk, and
	// its pages count against the memory of the container that writes
	// them (tmpfs pages are charged to the writer's memory cgroup).
	ShmSize resource.Quantity
	// KubeletDir is the kubelet's root directory, where the daemon pod's
	// emptyDir lives on the host; /var/lib/kubelet when empty.
	KubeletDir string
	// Poll is how often Stop looks whether the pod is gone; 200ms when zero.
	Poll time.Duration
}

var _ Runner = (*PodRunner)(nil)

// PodName is the daemon pod's name for a device on this node:
// gpu-mps-<node>-<16 hex digits>, a hash of node and device (a UUID may
// hold capitals and slashes, which no pod name may). The node is there in
// the clear so that the admission policy can require it to be the
// creating token's node (CEL computes no hash): no node's token can take
// another node's names. The hash has a fixed width, so the node is the
// rest, and no node's names are another's.
func (r *PodRunner) PodName(uuid string) string {
	return "gpu-mps-" + r.NodeName + "-" + shortHash(r.NodeName+"/"+uuid)
}

// legacyPodName is the name earlier versions gave the pod, which bound no
// node; such a pod of this node keeps serving its clients until it ends.
func (r *PodRunner) legacyPodName(uuid string) string {
	return "gpu-mps-" + shortHash(r.NodeName+"/"+uuid)
}

// maxPodName: a pod's name is a DNS subdomain, so a node name longer than
// 228 characters leaves no room for its daemon pods' names.
const maxPodName = 253

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:16]
}

// DefaultShmSize is the size of a daemon's /dev/shm when PodRunner.ShmSize
// is zero: room for the buffers MPS clients exchange with their server, and
// more than the 64Mi a container runtime gives a pod's own /dev/shm.
var DefaultShmSize = resource.MustParse("256Mi")

// ShmVolume is the name of a daemon pod's /dev/shm volume.
const ShmVolume = "shm"

// Paths inside the driver root (the daemon's chroot) of a daemon pod.
// The driver root is mounted read-only, and a read-only mount can hold a
// mount only on a directory that exists in it (the runtime cannot create
// the mount point: NVIDIA's device plugin met the same, k8s-device-plugin
// pull request 505). /tmp and /dev/shm exist in a host's root and in the
// GPU Operator's driver root, unlike /tmp/nvidia-mps: the daemon's own
// directory (Daemon.Dir) is its /tmp, holding its pipe and log
// directories, and its /dev/shm is the pod's tmpfs.
const (
	daemonPodTmp     = "/tmp"
	daemonPodPipeDir = daemonPodTmp + "/pipe"
	daemonPodLogDir  = daemonPodTmp + "/log"
)

// Pod is the daemon pod of d. d.Dir is a host path: the plugin's state
// directory is mounted at the same path in its container.
//
// The pod writes only to its own directories: d.Dir (pid file; on real
// GPUs also the daemon's /tmp with its pipe and log directories) and its
// /dev/shm emptyDir. The driver root, where the daemon reads NVIDIA's
// programs and libraries, is read-only. Its submounts (the host's /dev,
// /proc, /sys) keep their own flags: the MPS server opens device nodes,
// which a read-only mount would allow anyway (sb_permission() refuses
// writes to regular files, directories and symlinks only), but the
// driver's tools may create missing /dev/nvidia* nodes (nvidia-modprobe),
// which a recursively read-only mount would refuse; the daemon pod is
// privileged on real GPUs in any case.
func (r *PodRunner) Pod(d *Daemon) *corev1.Pod {
	dirType := corev1.HostPathDirectoryOrCreate
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &dirType}}}
	}
	size := r.ShmSize
	if size.IsZero() {
		size = DefaultShmSize
	}
	shm := corev1.Volume{Name: ShmVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size}}}
	args := []string{"mps-control-daemon", "--device=" + d.DeviceUUID, "--dir=/mps"}
	volumes := []corev1.Volume{hostPath("mps", d.Dir), shm}
	mounts := []corev1.VolumeMount{{Name: "mps", MountPath: "/mps"}}
	privileged := false
	if r.HostDriverRoot != "" {
		// As NVIDIA's template, the daemon runs chrooted into the driver
		// root, with its directories where it looks for them.
		args = append(args, "--driver-root=/driver-root", "--pipe-dir="+daemonPodPipeDir, "--log-dir="+daemonPodLogDir)
		if r.DaemonDefaults {
			args = append(args, defaultLimitArgs(d.Defaults)...)
		}
		privileged = true
		volumes = append(volumes, hostPath("driver-root", r.HostDriverRoot))
		mounts = append(mounts,
			corev1.VolumeMount{Name: "driver-root", MountPath: "/driver-root", ReadOnly: true},
			corev1.VolumeMount{Name: "mps", MountPath: "/driver-root" + daemonPodTmp},
			corev1.VolumeMount{Name: ShmVolume, MountPath: "/driver-root" + ContainerShmDir})
	} else {
		// The stand-in needs no /dev/shm; the volume is its clients'.
		mounts = append(mounts, corev1.VolumeMount{Name: ShmVolume, MountPath: ContainerShmDir})
	}
	no := false
	grace := int64(30)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        r.PodName(d.DeviceUUID),
			Namespace:   r.Namespace,
			Labels:      map[string]string{DaemonComponentLabel: DaemonComponent},
			Annotations: map[string]string{DaemonDeviceAnnotation: d.DeviceUUID, DaemonNodeAnnotation: r.NodeName},
		},
		Spec: corev1.PodSpec{
			// Bound to this node without the scheduler, as NVIDIA's.
			NodeName: r.NodeName,
			// MPS identifies its clients by PID: the server must see them
			// as the host does (NVIDIA's daemon pods run with hostPID too).
			HostPID:                       true,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			PriorityClassName:             cmp.Or(r.PriorityClassName, DefaultPriorityClassName),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Volumes:                       volumes,
			Containers: []corev1.Container{{
				Name:            "mps-control-daemon",
				Image:           r.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/usr/bin/gpu-kubelet-plugin"},
				Args:            args,
				SecurityContext: &corev1.SecurityContext{Privileged: &privileged},
				VolumeMounts:    mounts,
				// Requests only: an MPS server's memory grows with its
				// clients, and a limit would kill it under them.
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
		},
	}
}

// defaultLimitArgs are the daemon program's flags for a daemon's defaults.
func defaultLimitArgs(s Settings) []string {
	var args []string
	if s.ActiveThreadPercentage > 0 {
		args = append(args, fmt.Sprintf("--default-active-thread-percentage=%d", s.ActiveThreadPercentage))
	}
	if s.PinnedMemoryBytes > 0 {
		args = append(args, fmt.Sprintf("--default-pinned-memory-bytes=%d", s.PinnedMemoryBytes))
	}
	return args
}
