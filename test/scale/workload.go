// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The fleet (Nodes and the plugin's ResourceSlices), the DeviceClasses, and
// one measured run: pods with claims created at once, timed until every pod
// is bound, then everything removed again for the next run.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	templateNode = "benchscale-template-node"
	namespace    = "bench"
)

// layout is one way the driver publishes a node and one kind of pod request.
type layout struct {
	name        string
	pluginFlags []string
	request     resourceapi.ExactDeviceRequest
}

func layouts() []layout {
	whole := resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	mig1g := resourceapi.ExactDeviceRequest{DeviceClassName: "mig.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}}}
	// The documented MIG path: the profile's class (the chart renders one
	// per profile), no selector of the claim's own.
	mig1gClass := resourceapi.ExactDeviceRequest{DeviceClassName: "mig-1g.10gb.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	frac := resourceapi.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.allowMultipleAllocations"}}},
		Capacity:  &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{"memory": resource.MustParse("20Gi")}}}
	return []layout{
		{name: "whole", pluginFlags: []string{"--feature-gates=DynamicMIG=false"}, request: whole},
		{name: "mig-1g", request: mig1g},
		{name: "mig-1g-class", request: mig1gClass},
		// Dynamic MIG with three profiles published (--mig-profiles): 11
		// devices per GPU instead of 26.
		{name: "mig3p-1g", pluginFlags: []string{"--mig-profiles=1g.10gb,3g.40gb,7g.80gb"}, request: mig1g},
		{name: "mig-whole", request: whole},
		{name: "frac-20gi", pluginFlags: []string{"--fractional-memory"}, request: frac},
	}
}

// pluginSlices runs the plugin's --print-slices once for a template node.
func pluginSlices(plugin, profile string, l layout) ([]*resourceapi.ResourceSlice, error) {
	args := append([]string{"--print-slices", "--simulate=" + profile, "--node-name=" + templateNode}, l.pluginFlags...)
	var out, errb bytes.Buffer
	cmd := exec.Command(plugin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s: %w: %s", plugin, strings.Join(args, " "), err, errb.String())
	}
	var slices []*resourceapi.ResourceSlice
	err := decodeAll(&out, func(raw []byte) error {
		s := &resourceapi.ResourceSlice{}
		if err := utilyaml.Unmarshal(raw, s); err != nil {
			return err
		}
		if s.Kind == "ResourceSlice" {
			slices = append(slices, s)
		}
		return nil
	})
	if len(slices) == 0 && err == nil {
		err = errors.New("the plugin printed no ResourceSlice")
	}
	return slices, err
}

func decodeAll(r io.Reader, fn func([]byte) error) error {
	rd := utilyaml.NewYAMLReader(bufioReader(r))
	for {
		raw, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if err := fn(raw); err != nil {
			return err
		}
	}
}

// deviceClasses reads the DeviceClass documents of a multi-document YAML
// file (the chart rendered by helm template).
func deviceClasses(file string) ([]*resourceapi.DeviceClass, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*resourceapi.DeviceClass
	err = decodeAll(f, func(raw []byte) error {
		var tm metav1.TypeMeta
		if err := utilyaml.Unmarshal(raw, &tm); err != nil {
			return err
		}
		if tm.Kind != "DeviceClass" {
			return nil
		}
		dc := &resourceapi.DeviceClass{}
		if err := utilyaml.Unmarshal(raw, dc); err != nil {
			return err
		}
		out = append(out, dc)
		return nil
	})
	if len(out) == 0 && err == nil {
		err = fmt.Errorf("%s holds no DeviceClass", file)
	}
	return out, err
}

// parallel calls fn(0..n-1) from workers goroutines; the first error wins.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// createFleet creates the DeviceClasses, n Nodes, and for each node the
// template slices with only the node and pool renamed.
func createFleet(ctx context.Context, cs kubernetes.Interface, classes []*resourceapi.DeviceClass, slices []*resourceapi.ResourceSlice, n, workers int) error {
	for _, dc := range classes {
		dc = dc.DeepCopy()
		dc.ResourceVersion = ""
		if _, err := cs.ResourceV1().DeviceClasses().Create(ctx, dc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("DeviceClass %s: %w", dc.Name, err)
		}
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The ServiceAccount admission plugin wants the namespace's default
	// ServiceAccount; no controller-manager creates it here.
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	alloc := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("224"), corev1.ResourceMemory: resource.MustParse("2Ti"),
		corev1.ResourcePods: resource.MustParse("110"),
	}
	return parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		name := nodeName(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
		node, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("node %s: %w", name, err)
		}
		// The apiserver's TaintNodesByCondition admission taints a new node
		// not-ready; no node lifecycle controller lifts it here.
		node.Spec.Taints = nil
		if node, err = cs.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s taints: %w", name, err)
		}
		node.Status = corev1.NodeStatus{
			Capacity: alloc, Allocatable: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("node %s status: %w", name, err)
		}
		for _, t := range slices {
			s := t.DeepCopy()
			s.ResourceVersion = ""
			s.Name = strings.ReplaceAll(s.Name, templateNode, name)
			s.GenerateName = strings.ReplaceAll(s.GenerateName, templateNode, name)
			if s.Spec.NodeName != nil {
				s.Spec.NodeName = ptr.To(name)
			}
			s.Spec.Pool.Name = strings.ReplaceAll(s.Spec.Pool.Name, templateNode, name)
			if _, err := cs.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("slice of %s: %w", name, err)
			}
		}
		return nil
	})
}

func pct(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// cleanup force-deletes the pods and removes every claim (there is no
// kubelet to confirm termination and no garbage collector); the scheduler
// sees the devices free again when the claims are gone.
func cleanup(ctx context.Context, cs kubernetes.Interface, workers int) error {
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	err = parallel(ctx, len(pods.Items), workers, func(ctx context.Context, i int) error {
		err := cs.CoreV1().Pods(namespace).Delete(ctx, pods.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete pods: %w", err)
	}
	for attempt := 0; ; attempt++ {
		claims, err := cs.ResourceV1().ResourceClaims(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(claims.Items) == 0 {
			break
		}
		if attempt > 10 {
			return fmt.Errorf("%d claims remain", len(claims.Items))
		}
		err = parallel(ctx, len(claims.Items), workers, func(ctx context.Context, i int) error {
			rc := &claims.Items[i]
			if len(rc.Finalizers) > 0 {
				_, err := cs.ResourceV1().ResourceClaims(namespace).Patch(ctx, rc.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
			}
			err := cs.ResourceV1().ResourceClaims(namespace).Delete(ctx, rc.Name, metav1.DeleteOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("delete claims: %w", err)
		}
	}
	// Let the scheduler's informers catch up with the deletions.
	time.Sleep(3 * time.Second)
	return nil
}
