// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A validating admission policy never sees the pod a client sent: the API
// server first applies the API's defaults and then its built-in mutating
// admission plugins (issue 55: Priority admission filled in a cluster's
// globalDefault PriorityClass, and the exact daemon-pod policy refused the
// plugin's own pod on every such cluster). mutateAsAPIServer models, in
// that order, what the API server does to a created pod that can reach a
// policy: API defaulting, ServiceAccount admission, DefaultTolerationSeconds
// and Priority admission, each from the behaviour Kubernetes documents.
// Plugins that change nothing the pod could carry here (LimitRanger without
// a LimitRange in the driver's namespace, RuntimeClass without a
// runtimeClassName) are left out; a webhook or MutatingAdmissionPolicy of
// the cluster's own is not Kubernetes' to model.

// apiServerCluster is what those plugins read: the PriorityClasses (the two
// built-in ones and the cluster's own).
type apiServerCluster struct {
	name    string
	classes []schedulingv1.PriorityClass
}

// The built-in classes every API server creates, with fixed values.
var builtinPriorityClasses = []schedulingv1.PriorityClass{
	{ObjectMeta: metav1.ObjectMeta{Name: "system-node-critical"}, Value: 2000001000},
	{ObjectMeta: metav1.ObjectMeta{Name: "system-cluster-critical"}, Value: 2000000000},
}

func withClasses(extra ...schedulingv1.PriorityClass) []schedulingv1.PriorityClass {
	return append(append([]schedulingv1.PriorityClass{}, builtinPriorityClasses...), extra...)
}

// The clusters the policy must work on: a clean room, and production ones
// with a globalDefault class (one that preempts, one that never does).
var (
	plainCluster      = apiServerCluster{name: "NoDefaultClass", classes: withClasses()}
	productionCluster = apiServerCluster{name: "GlobalDefaultClass", classes: withClasses(schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-default"}, Value: 1000, GlobalDefault: true})}
	batchCluster = apiServerCluster{name: "GlobalDefaultNeverPreempts", classes: withClasses(schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "batch-default"}, Value: -10, GlobalDefault: true,
		PreemptionPolicy: ptr.To(corev1.PreemptNever)})}
	apiServerClusters = []apiServerCluster{plainCluster, productionCluster, batchCluster}
)

// mutateAsAPIServer changes pod (a CREATE) as the API server would before
// validating admission; an error is the API server's refusal.
func mutateAsAPIServer(t *testing.T, pod *corev1.Pod, c apiServerCluster) error {
	t.Helper()
	defaultPod(pod)
	serviceAccountAdmission(pod)
	defaultTolerationSeconds(pod)
	if err := priorityAdmission(pod, c); err != nil {
		return err
	}
	// The v1 form carries the deprecated copy of the account's name.
	pod.Spec.DeprecatedServiceAccount = pod.Spec.ServiceAccountName //lint:ignore SA1019 the API server still fills it, and the policy sees it
	return nil
}

// defaultPod: the defaults of a v1 Pod that the daemon pod could leave
// unset.
func defaultPod(pod *corev1.Pod) {
	s := &pod.Spec
	if s.DNSPolicy == "" {
		s.DNSPolicy = corev1.DNSClusterFirst
	}
	if s.RestartPolicy == "" {
		s.RestartPolicy = corev1.RestartPolicyAlways
	}
	if s.TerminationGracePeriodSeconds == nil {
		s.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if s.SecurityContext == nil {
		s.SecurityContext = &corev1.PodSecurityContext{}
	}
	if s.SchedulerName == "" {
		s.SchedulerName = corev1.DefaultSchedulerName
	}
	if s.EnableServiceLinks == nil {
		s.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	for i := range s.Containers {
		c := &s.Containers[i]
		if c.TerminationMessagePath == "" {
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		}
		if c.TerminationMessagePolicy == "" {
			c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = corev1.PullIfNotPresent
			if _, tag, ok := strings.Cut(c.Image[strings.LastIndex(c.Image, "/")+1:], ":"); !ok || tag == "latest" {
				c.ImagePullPolicy = corev1.PullAlways
			}
		}
	}
}

// serviceAccountAdmission: the namespace's "default" account when the pod
// names none, and its token as a projected volume in every container
// unless the pod opts out. (An account's image pull secrets would be
// copied too; the driver's namespace's "default" account has none.)
func serviceAccountAdmission(pod *corev1.Pod) {
	s := &pod.Spec
	if s.ServiceAccountName == "" {
		s.ServiceAccountName = "default"
	}
	if s.AutomountServiceAccountToken != nil && !*s.AutomountServiceAccountToken {
		return
	}
	s.Volumes = append(s.Volumes, corev1.Volume{Name: "kube-api-access-x7k2q", VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
		}}}})
	for i := range s.Containers {
		s.Containers[i].VolumeMounts = append(s.Containers[i].VolumeMounts, corev1.VolumeMount{
			Name: "kube-api-access-x7k2q", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
	}
}

// defaultTolerationSeconds: 300s of not-ready and unreachable NoExecute
// taints, each unless a toleration already covers it (an empty key and
// an empty effect cover every key and effect).
func defaultTolerationSeconds(pod *corev1.Pod) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		covered := false
		for _, tol := range pod.Spec.Tolerations {
			if (tol.Key == key || tol.Key == "") && (tol.Effect == corev1.TaintEffectNoExecute || tol.Effect == "") {
				covered = true
			}
		}
		if !covered {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists,
				Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)})
		}
	}
}

// priorityAdmission: a pod that names no class gets the globalDefault one
// (name, value, preemption policy), or priority 0 when there is none; a
// named class must exist; a priority or preemption policy the client set
// must be the class's.
func priorityAdmission(pod *corev1.Pod, c apiServerCluster) error {
	s := &pod.Spec
	var class *schedulingv1.PriorityClass
	if s.PriorityClassName == "" {
		for i := range c.classes {
			if c.classes[i].GlobalDefault {
				class = &c.classes[i]
			}
		}
		if class == nil {
			class = &schedulingv1.PriorityClass{}
		}
		s.PriorityClassName = class.Name
	} else {
		for i := range c.classes {
			if c.classes[i].Name == s.PriorityClassName {
				class = &c.classes[i]
			}
		}
		if class == nil {
			return fmt.Errorf("no PriorityClass with name %s was found", s.PriorityClassName)
		}
	}
	if s.Priority != nil && *s.Priority != class.Value {
		return fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec: class %q gives %d", *s.Priority, class.Name, class.Value)
	}
	policy := corev1.PreemptLowerPriority
	if class.PreemptionPolicy != nil {
		policy = *class.PreemptionPolicy
	}
	if s.PreemptionPolicy != nil && *s.PreemptionPolicy != policy {
		return fmt.Errorf("preemptionPolicy %s must not be provided in pod spec: class %q gives %s", *s.PreemptionPolicy, class.Name, policy)
	}
	s.Priority, s.PreemptionPolicy = ptr.To(class.Value), &policy
	return nil
}

// The model itself: what it adds to a pod that sets nothing, and what it
// leaves of a pod that sets everything.
func TestAPIServerModel(t *testing.T) {
	bare := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := mutateAsAPIServer(t, bare, productionCluster); err != nil {
		t.Fatal(err)
	}
	s := bare.Spec
	if s.PriorityClassName != "cluster-default" || *s.Priority != 1000 || *s.PreemptionPolicy != corev1.PreemptLowerPriority ||
		s.ServiceAccountName != "default" || len(s.Volumes) != 1 || len(s.Tolerations) != 2 || !*s.EnableServiceLinks ||
		s.Containers[0].ImagePullPolicy != corev1.PullAlways {
		t.Errorf("a bare pod on a cluster with a default class: %+v", s)
	}
	never := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if err := mutateAsAPIServer(t, never, batchCluster); err != nil || *never.Spec.Priority != -10 || *never.Spec.PreemptionPolicy != corev1.PreemptNever {
		t.Errorf("a bare pod with a default class that never preempts: %v %+v", err, never.Spec)
	}
	named := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: "system-node-critical", AutomountServiceAccountToken: ptr.To(false),
		Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, Containers: []corev1.Container{{Name: "c", Image: "x:1"}}}}
	if err := mutateAsAPIServer(t, named, productionCluster); err != nil || named.Spec.PriorityClassName != "system-node-critical" ||
		*named.Spec.Priority != 2000001000 || len(named.Spec.Volumes) != 0 || len(named.Spec.Tolerations) != 1 {
		t.Errorf("a pod that names its class, tolerates every taint and mounts no token: %v %+v", err, named.Spec)
	}
	for _, bad := range []corev1.PodSpec{{PriorityClassName: "nope"}, {PriorityClassName: "system-node-critical", Priority: ptr.To[int32](1)}} {
		p := &corev1.Pod{Spec: bad}
		if err := mutateAsAPIServer(t, p, plainCluster); err == nil {
			t.Errorf("Priority admission admitted %+v", bad)
		}
	}
}
