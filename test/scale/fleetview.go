// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// fleetCommands are the fleet-wide gpudra commands timed on each fleet
// (issue 31: at 500 nodes in at most 5 s and 1 GiB).
var fleetCommands = [][]string{
	{"usage"},
	{"capacity", "--mig-profile", "1g.10gb"},
	// A Deployment's pod (one CPU, one 1g.10gb MIG device from a
	// template) through the scheduler's filters (issue 39); the
	// Deployment has no pods here, no controller-manager runs.
	{"capacity", "--for", "deployment/" + capacityDeployment, "-n", namespace},
}

const capacityDeployment = "bench-capacity"

// createCapacityDeployment creates the Deployment that capacity --for
// counts, and its claim template.
func createCapacityDeployment(ctx context.Context, cs kubernetes.Interface) error {
	req := resourceapi.ExactDeviceRequest{DeviceClassName: "mig.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}}}
	t := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: capacityDeployment}, Spec: resourceapi.ResourceClaimTemplateSpec{
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "mig", Exactly: &req}}}}}}
	if _, err := cs.ResourceV1().ResourceClaimTemplates(namespace).Create(ctx, t, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := map[string]string{"app": capacityDeployment}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: capacityDeployment}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{{Name: "mig", ResourceClaimTemplateName: ptr.To(capacityDeployment)}},
			Containers: []corev1.Container{{Name: "c", Image: "pause", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}, Claims: []corev1.ResourceClaim{{Name: "mig"}}}}}}}}}
	if _, err := cs.AppsV1().Deployments(namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// timeFleetCommands runs each of fleetCommands three times as a user would
// and logs the middle run's wall time and peak RSS, and its last line.
func timeFleetCommands(ctx context.Context, cs kubernetes.Interface, gpudra, kubeconfig string, nodes int) error {
	if err := createCapacityDeployment(ctx, cs); err != nil {
		return fmt.Errorf("capacity's Deployment: %w", err)
	}
	for _, args := range fleetCommands {
		var walls, rss []float64
		var last string
		for range diagnoseRuns {
			var out bytes.Buffer
			cmd := exec.CommandContext(ctx, gpudra, append(args, "--kubeconfig="+kubeconfig)...)
			cmd.Stdout, cmd.Stderr = &out, &out
			t := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("gpudra %s: %w\n%s", strings.Join(args, " "), err, out.String())
			}
			walls = append(walls, time.Since(t).Seconds())
			rss = append(rss, float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)/1024)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			last = lines[len(lines)-1]
		}
		sort.Float64s(walls)
		sort.Float64s(rss)
		logf("%d nodes: gpudra %s: wall p50 %.2f s, max RSS p50 %.0f MiB; %s", nodes, strings.Join(args, " "), walls[1], rss[1], last)
	}
	return nil
}
