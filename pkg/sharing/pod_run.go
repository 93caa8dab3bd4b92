// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package sharing

// A PodRunner's daemon pods through their life: created, recognised as
// this node's, replaced, deleted and listed.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Start implements Runner. A pod left from a daemon that ended (failed,
// or being deleted) is replaced; a live one of this node is the daemon
// (one an earlier version named included); a pod under the daemon's name
// that is not this node's is an error, never taken for the daemon.
func (r *PodRunner) Start(ctx context.Context, d *Daemon) error {
	pods := r.Client.CoreV1().Pods(r.Namespace)
	want := r.Pod(d)
	if len(want.Name) > maxPodName {
		return fmt.Errorf("daemon pod name %s is too long (%d characters, at most %d): node name %q is too long for MPS daemon pods", want.Name, len(want.Name), maxPodName, r.NodeName)
	}
	own, err := r.own(ctx, d.DeviceUUID)
	if err != nil {
		return err
	}
	for _, p := range own {
		if podAlive(p) {
			return r.linkShm(d, p)
		}
	}
	for _, p := range own {
		if p.Name != want.Name {
			if err := r.deletePod(ctx, p); err != nil {
				return err
			}
		}
	}
	for {
		created, err := pods.Create(ctx, want, metav1.CreateOptions{})
		if err == nil {
			return r.linkShm(d, created)
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create daemon pod %s/%s: %w", r.Namespace, want.Name, err)
		}
		p, err := pods.Get(ctx, want.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("get daemon pod %s/%s: %w", r.Namespace, want.Name, err)
		}
		if !r.owns(p, d.DeviceUUID) {
			return fmt.Errorf("pod %s/%s, on node %q for device %q, is not the MPS daemon of %s on node %s; an administrator must delete it",
				r.Namespace, p.Name, p.Spec.NodeName, p.Annotations[DaemonDeviceAnnotation], d.DeviceUUID, r.NodeName)
		}
		if podAlive(p) {
			return r.linkShm(d, p)
		}
		if err := r.deletePod(ctx, p); err != nil {
			return err
		}
	}
}

// owns reports whether p is this node's daemon pod of device uuid: bound to
// this node (which the admission policy pins to the creating token's node,
// and which no update changes), of this component and device. A pod that
// carries this node's name or an earlier version's node label but is bound
// to another node is someone else's.
func (r *PodRunner) owns(p *corev1.Pod, uuid string) bool {
	return p.Spec.NodeName == r.NodeName && p.Labels[DaemonComponentLabel] == DaemonComponent && p.Annotations[DaemonDeviceAnnotation] == uuid
}

// own returns this node's daemon pods of uuid, under this version's name
// and an earlier version's.
func (r *PodRunner) own(ctx context.Context, uuid string) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, name := range []string{r.PodName(uuid), r.legacyPodName(uuid)} {
		p, err := r.Client.CoreV1().Pods(r.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get daemon pod %s/%s: %w", r.Namespace, name, err)
		}
		if r.owns(p, uuid) {
			out = append(out, p)
		}
	}
	return out, nil
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

// Running implements Runner: this node's pod exists and neither ended nor
// is being deleted.
func (r *PodRunner) Running(ctx context.Context, d *Daemon) (bool, error) {
	own, err := r.own(ctx, d.DeviceUUID)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(own, podAlive), nil
}

// Stop implements Runner: it deletes this node's pods of d, whose program
// sends `quit` to its daemon on SIGTERM, and waits until they are gone, so
// that nothing uses the daemon's directory when the caller removes it.
// Another node's pod is not d's daemon, and stays.
func (r *PodRunner) Stop(ctx context.Context, d *Daemon) error {
	own, err := r.own(ctx, d.DeviceUUID)
	if err != nil {
		return err
	}
	for _, p := range own {
		if err := r.deletePod(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// deletePod deletes p, only p (a precondition on its UID), and waits until
// no pod of that UID is left under its name.
func (r *PodRunner) deletePod(ctx context.Context, p *corev1.Pod) error {
	pods := r.Client.CoreV1().Pods(r.Namespace)
	opts := metav1.DeleteOptions{}
	if p.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &p.UID}
	}
	err := pods.Delete(ctx, p.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete daemon pod %s/%s: %w", r.Namespace, p.Name, err)
	}
	poll := r.Poll
	if poll == 0 {
		poll = 200 * time.Millisecond
	}
	for {
		q, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || (err == nil && q.UID != p.UID) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon pod %s/%s still exists: %w", r.Namespace, p.Name, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// List implements Runner: the devices of this node's daemon pods, those of
// earlier versions included. The API server selects by spec.nodeName; the
// check again here is what makes a pod this node's (owns).
func (r *PodRunner) List(ctx context.Context) ([]string, error) {
	list, err := r.Client.CoreV1().Pods(r.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: DaemonComponentLabel + "=" + DaemonComponent,
		FieldSelector: "spec.nodeName=" + r.NodeName,
	})
	if err != nil {
		return nil, fmt.Errorf("list daemon pods: %w", err)
	}
	var out []string
	for i := range list.Items {
		if uuid := list.Items[i].Annotations[DaemonDeviceAnnotation]; uuid != "" && r.owns(&list.Items[i], uuid) {
			out = append(out, uuid)
		}
	}
	return out, nil
}
