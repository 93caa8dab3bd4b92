// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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

// Pod is the daemon pod of d. d.Dir is a host path: the plugin's state
// directory is mounted at the same path in its container.
func (r *PodRunner) Pod(d *Daemon) *corev1.Pod {
	dirType := corev1.HostPathDirectoryOrCreate
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &dirType}}}
	}
	args := []string{"mps-control-daemon", "--device=" + d.DeviceUUID, "--dir=/mps"}
	volumes := []corev1.Volume{hostPath("mps", d.Dir)}
	mounts := []corev1.VolumeMount{{Name: "mps", MountPath: "/mps"}}
	privileged := false
	if r.HostDriverRoot != "" {
		// As NVIDIA's template: the driver root, and the daemon's pipe,
		// log and shm directories where the tools in it look for them.
		args = append(args, "--driver-root=/driver-root")
		if r.DaemonDefaults {
			args = append(args, defaultLimitArgs(d.Defaults)...)
		}
		privileged = true
		volumes = append(volumes, hostPath("driver-root", r.HostDriverRoot), hostPath("pipe", d.PipeDir()), hostPath("log", d.LogDir()), hostPath("shm", d.ShmDir()))
		mounts = append(mounts,
			corev1.VolumeMount{Name: "driver-root", MountPath: "/driver-root"},
			corev1.VolumeMount{Name: "pipe", MountPath: "/driver-root" + ContainerPipeDir},
			corev1.VolumeMount{Name: "log", MountPath: "/driver-root" + ContainerLogDir},
			corev1.VolumeMount{Name: "shm", MountPath: "/driver-root" + ContainerShmDir})
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
		_, err := pods.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create daemon pod %s/%s: %w", r.Namespace, want.Name, err)
		}
		if alive, err := r.Running(ctx, d); err != nil || alive {
			return err
		}
		if err := r.Stop(ctx, d); err != nil {
			return err
		}
	}
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
