// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const migExtNS = "gpu-migext"

// migExtPod is a pod written for the NVIDIA device plugin's mixed MIG
// strategy: no claim, only a nvidia.com/mig-<profile> limit.
func migExtPod(name, resource string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: ctr
    image: localhost/busybox:latest
    imagePullPolicy: IfNotPresent
    command: [sh, -c, 'nvidia-smi -L; sleep 3600']
    resources:
      limits: {%s: 1}
`, name, migExtNS, resource)
}

// TestMigExtendedResources: on simulated H100s with dynamic MIG, pods that
// ask for nvidia.com/mig-1g.10gb and nvidia.com/mig-3g.40gb (the chart's
// migExtendedResources classes) each get a MIG device of that profile, made
// for them; deleting the pods leaves nothing behind.
func TestMigExtendedResources(t *testing.T) {
	requireCleanNode(t)
	testNamespace(t, migExtNS)
	pods := []struct{ name, profile, resource, class string }{
		{"mig-small", "1g.10gb", "nvidia.com/mig-1g.10gb", "mig-1g.10gb.nvidia.com"},
		{"mig-medium", "3g.40gb", "nvidia.com/mig-3g.40gb", "mig-3g.40gb.nvidia.com"},
	}
	for _, p := range pods {
		applyYAML(t, migExtPod(p.name, p.resource))
	}
	ctx := context.Background()
	var claims []string
	seen := map[string]string{}
	for _, p := range pods {
		waitRunningIn(t, migExtNS, p.name)
		_, parent, migs := gpuOfIn(t, migExtNS, p.name, "")
		if len(migs) != 1 || !strings.HasPrefix(migs[0], p.profile+"=") {
			t.Fatalf("pod %s (%s) sees MIG devices %v on %s, want one %s", p.name, p.resource, migs, parent, p.profile)
		}
		if other, dup := seen[migs[0]]; dup {
			t.Fatalf("pods %s and %s see the same MIG device %s", other, p.name, migs[0])
		}
		seen[migs[0]] = p.name
		t.Logf("%s: %s on %s", p.name, migs[0], parent)

		// The scheduler's claim for the extended resource: the pod's status
		// names it, it asks the profile's class, and holds that profile's
		// MIG device.
		st := podIn(t, migExtNS, p.name).Status.ExtendedResourceClaimStatus
		if st == nil || st.ResourceClaimName == "" || len(st.RequestMappings) != 1 ||
			st.RequestMappings[0].ResourceName != p.resource || st.RequestMappings[0].ContainerName != "ctr" {
			t.Fatalf("pod %s: extendedResourceClaimStatus %+v, want one mapping of %s for ctr", p.name, st, p.resource)
		}
		claim, err := client.ResourceV1().ResourceClaims(migExtNS).Get(ctx, st.ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, claim.Name)
		var class string
		for _, r := range claim.Spec.Devices.Requests {
			if r.Name == st.RequestMappings[0].RequestName && r.Exactly != nil {
				class = r.Exactly.DeviceClassName
			}
		}
		if class != p.class {
			t.Errorf("claim %s asks class %q for %s, want %s", claim.Name, class, p.resource, p.class)
		}
		want := regexp.MustCompile(`^gpu-\d+-mig-` + strings.ReplaceAll(p.profile, ".", "") + `-\d+-\d+$`)
		if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || !want.MatchString(a.Devices.Results[0].Device) {
			t.Fatalf("claim %s allocation %+v, want one %s MIG device", claim.Name, a, p.profile)
		} else {
			t.Logf("%s: claim %s holds %s", p.name, claim.Name, a.Devices.Results[0].Device)
		}
	}
	if n := migInstances(t); n != 2 {
		t.Errorf("simulated GPUs hold %d MIG instances with both pods running, want 2", n)
	}

	for _, p := range pods {
		if err := client.CoreV1().Pods(migExtNS).Delete(ctx, p.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		waitFor(t, "pod "+p.name+" gone", 60*time.Second, func() (bool, string) {
			_, err := client.CoreV1().Pods(migExtNS).Get(ctx, p.name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	for _, c := range claims {
		waitFor(t, "extended-resource claim "+c+" deleted", 60*time.Second, func() (bool, string) {
			_, err := client.ResourceV1().ResourceClaims(migExtNS).Get(ctx, c, metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
	waitNodeClean(t, "after the MIG extended-resource pods", nil)
	if n := migInstances(t); n != 0 {
		t.Errorf("%d MIG instances left", n)
	}
}
