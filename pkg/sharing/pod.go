// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Labels and annotations of daemon pods.
const (
	DaemonComponentLabel = "app.kubernetes.io/component"
	DaemonComponent      = "mps-control-daemon"
	// DaemonNodeLabel holds a hash of the node name (a label value cannot
	// hold every node name).
	DaemonNodeLabel = "gpu.nvidia.com/mps-node"
	// DaemonDeviceAnnotation holds the device UUID (a MIG UUID of the old
	// form has slashes, which no label value may).
	DaemonDeviceAnnotation = "gpu.nvidia.com/mps-device"
)

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
	// PriorityClassName, when set, is given to daemon pods.
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

// PodName is the daemon pod's name for a device on this node.
func (r *PodRunner) PodName(uuid string) string {
	return "gpu-mps-" + shortHash(r.NodeName+"/"+uuid)
}

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
			Labels:      map[string]string{DaemonComponentLabel: DaemonComponent, DaemonNodeLabel: shortHash(r.NodeName)},
			Annotations: map[string]string{DaemonDeviceAnnotation: d.DeviceUUID, "gpu.nvidia.com/mps-node-name": r.NodeName},
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
			PriorityClassName:             r.PriorityClassName,
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

// Start implements Runner. A pod left from a daemon that ended (failed,
// or being deleted) is replaced.
func (r *PodRunner) Start(ctx context.Context, d *Daemon) error {
	pods := r.Client.CoreV1().Pods(r.Namespace)
	want := r.Pod(d)
	for {
		created, err := pods.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			return r.linkShm(d, created)
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create daemon pod %s/%s: %w", r.Namespace, want.Name, err)
		}
		p, err := pods.Get(ctx, want.Name, metav1.GetOptions{})
		if err == nil && podAlive(p) {
			return r.linkShm(d, p)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("get daemon pod %s/%s: %w", r.Namespace, want.Name, err)
		}
		if err := r.Stop(ctx, d); err != nil {
			return err
		}
	}
}

// ShmHostPath is where, on the host, the kubelet mounts the /dev/shm
// emptyDir of the daemon pod p.
func (r *PodRunner) ShmHostPath(p *corev1.Pod) string {
	root := r.KubeletDir
	if root == "" {
		root = "/var/lib/kubelet"
	}
	return filepath.Join(root, "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", ShmVolume)
}

// linkShm makes d.ShmDir(), which clients' CDI specs name, a link to the
// daemon pod's /dev/shm emptyDir: the pod's UID, and so the emptyDir's
// host path, changes when the pod is replaced, while CDI specs, written at
// prepare and again at start from the checkpoint, keep the one name.
func (r *PodRunner) linkShm(d *Daemon, p *corev1.Pod) error {
	if p.UID == "" {
		return fmt.Errorf("daemon pod %s/%s has no UID", p.Namespace, p.Name)
	}
	target := r.ShmHostPath(p)
	if err := os.MkdirAll(d.Dir, daemonDirMode); err != nil {
		return err
	}
	if cur, err := os.Readlink(d.ShmDir()); err == nil && cur == target {
		return nil
	}
	tmp := d.ShmDir() + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("link %s to the daemon pod's /dev/shm: %w", d.ShmDir(), err)
	}
	// A directory there (made by an earlier version, or by Ensure) goes
	// first: rename cannot replace a directory with a link.
	if fi, err := os.Lstat(d.ShmDir()); err == nil && fi.IsDir() {
		if err := os.RemoveAll(d.ShmDir()); err != nil {
			return fmt.Errorf("replace %s with a link to the daemon pod's /dev/shm: %w", d.ShmDir(), err)
		}
	}
	if err := os.Rename(tmp, d.ShmDir()); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("link %s to the daemon pod's /dev/shm: %w", d.ShmDir(), err)
	}
	return nil
}

func podAlive(p *corev1.Pod) bool {
	return p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded
}

// Running implements Runner: the pod exists and neither ended nor is
// being deleted.
func (r *PodRunner) Running(ctx context.Context, d *Daemon) (bool, error) {
	p, err := r.Client.CoreV1().Pods(r.Namespace).Get(ctx, r.PodName(d.DeviceUUID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get daemon pod %s/%s: %w", r.Namespace, r.PodName(d.DeviceUUID), err)
	}
	return podAlive(p), nil
}

// Stop implements Runner: it deletes the pod, whose program sends `quit` to
// its daemon on SIGTERM, and waits until the pod is gone, so that nothing
// uses the daemon's directory when the caller removes it.
func (r *PodRunner) Stop(ctx context.Context, d *Daemon) error {
	pods := r.Client.CoreV1().Pods(r.Namespace)
	name := r.PodName(d.DeviceUUID)
	err := pods.Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete daemon pod %s/%s: %w", r.Namespace, name, err)
	}
	poll := r.Poll
	if poll == 0 {
		poll = 200 * time.Millisecond
	}
	for {
		_, err := pods.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon pod %s/%s still exists: %w", r.Namespace, name, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// List implements Runner: the devices of this node's daemon pods.
func (r *PodRunner) List(ctx context.Context) ([]string, error) {
	sel := fmt.Sprintf("%s=%s,%s=%s", DaemonComponentLabel, DaemonComponent, DaemonNodeLabel, shortHash(r.NodeName))
	list, err := r.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list daemon pods: %w", err)
	}
	var out []string
	for _, p := range list.Items {
		if uuid := p.Annotations[DaemonDeviceAnnotation]; uuid != "" {
			out = append(out, uuid)
		}
	}
	return out, nil
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
