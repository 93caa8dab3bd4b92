// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package chart

import (
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The policies that confine a stolen kubelet-plugin token (issue 42),
// evaluated in process (policyeval_test.go) against the MPS daemon pod that
// pkg/sharing really builds, and against that pod with one attack each.
// test/e2e/pluginpolicy_test.go asks a real API server the same.

const (
	pluginUser = "system:serviceaccount:gpu-dra-driver:gpu-dra-driver-kubelet-plugin"
	ownNode    = "node-a"
	otherNode  = "node-b"
)

// policyMode is one way the chart deploys the plugin, as the daemon pods
// differ: without the driver root (simulated files), with it (simulated
// devices, real GPUs).
type policyMode struct {
	name string
	set  []string
}

var policyModes = []policyMode{
	{"SimulatedFiles", []string{"simulate.profile=h100x8", "kubeletDir=/var/lib/k0s/kubelet"}},
	{"SimulatedDevices", []string{"simulate.profile=h100x8", "simulate.nodeMode=devices", "driverRoot=/opt/nvidia-root"}},
	{"RealGPUs", nil},
	// The GPU Operator's driver tree, a root of its own.
	{"RealGPUsOwnDriverTree", []string{"driverRoot=/run/nvidia/driver"}},
}

func mpsPolicy(t *testing.T, set ...string) admissionv1.ValidatingAdmissionPolicy {
	t.Helper()
	var policy admissionv1.ValidatingAdmissionPolicy
	renderKind(t, "ValidatingAdmissionPolicy", "-mps-daemon-pods", &policy, append([]string{"driverName=" + testDriver}, set...)...)
	return policy
}

// requireDenied fails t unless the policy matched and one denial contains want.
func requireDenied(t *testing.T, what string, matched bool, denials []string, want string) {
	t.Helper()
	switch {
	case !matched:
		t.Errorf("%s: the policy did not match", what)
	case len(denials) == 0:
		t.Errorf("%s: admitted, want it denied (%q)", what, want)
	default:
		for _, d := range denials {
			if strings.Contains(d, want) {
				return
			}
		}
		t.Errorf("%s: denied, but no message says %q:\n  %s", what, want, strings.Join(denials, "\n  "))
	}
}

func TestChartMPSPolicyAdmitsTheDaemonPod(t *testing.T) {
	for _, m := range policyModes {
		t.Run(m.name, func(t *testing.T) {
			pod, _ := daemonPod(t, m.set...)
			policy := mpsPolicy(t, m.set...)
			matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: pod})
			if !matched || len(denials) > 0 {
				t.Errorf("the MPS daemon pod of pkg/sharing PodRunner.Pod: matched %v, denied: %s", matched, strings.Join(denials, "; "))
			}
			// Deleting it when its last claim is unprepared.
			matched, denials = admit(t, policy, admissionRequest{operation: "DELETE", username: pluginUser, nodeName: ownNode, oldObject: pod})
			if !matched || len(denials) > 0 {
				t.Errorf("deleting the daemon pod: matched %v, denied: %s", matched, strings.Join(denials, "; "))
			}
		})
	}
}

// Each attack alone on top of the daemon pod, in each mode; want is what
// the denial must name.
func TestChartMPSPolicyRefusesEachAttack(t *testing.T) {
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	addVolume := func(v corev1.Volume, mountPath string) func(*corev1.Pod, string) {
		return func(p *corev1.Pod, _ string) {
			p.Spec.Volumes = append(p.Spec.Volumes, v)
			c := &p.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: mountPath})
		}
	}
	withHostPath := func(name string, path func(pluginDir string) string) func(*corev1.Pod, string) {
		return func(p *corev1.Pod, pluginDir string) {
			addVolume(hostPath(name, path(pluginDir)), "/"+name)(p, pluginDir)
		}
	}
	ctr := func(f func(c *corev1.Container)) func(*corev1.Pod, string) {
		return func(p *corev1.Pod, _ string) { f(&p.Spec.Containers[0]) }
	}
	mount := func(v corev1.Volume, m corev1.VolumeMount) func(*corev1.Pod, string) {
		return func(p *corev1.Pod, _ string) {
			p.Spec.Volumes = append(p.Spec.Volumes, v)
			p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, m)
		}
	}
	// onMount changes the container's first mount (the daemon's own
	// directory, a host path under the plugin's directory).
	onMount := func(f func(m *corev1.VolumeMount)) func(*corev1.Pod, string) {
		return ctr(func(c *corev1.Container) { f(&c.VolumeMounts[0]) })
	}
	const uuid = "GPU-00000000-0000-0000-0000-0000000000a1"
	attacks := []struct {
		name   string
		mutate func(p *corev1.Pod, pluginDir string)
		want   string
		// skip: the modes where the row is what the daemon pod does.
		skip string
	}{
		{name: "AnotherNode", mutate: func(p *corev1.Pod, _ string) { p.Spec.NodeName = otherNode }, want: "spec.nodeName node-a, not node-b"},
		{name: "NoNodeName", mutate: func(p *corev1.Pod, _ string) { p.Spec.NodeName = "" }, want: "not an empty spec.nodeName"},
		{name: "NotADaemonPod", mutate: func(p *corev1.Pod, _ string) { p.Labels = map[string]string{"app": "x"} }, want: "app.kubernetes.io/component=mps-control-daemon"},
		{name: "Privileged", mutate: ctr(func(c *corev1.Container) { c.SecurityContext.Privileged = ptr.To(true) }), want: "spec.containers[0].securityContext differ", skip: "RealGPUs RealGPUsOwnDriverTree SimulatedDevices"},
		{name: "CapabilityAdded", mutate: ctr(func(c *corev1.Container) {
			c.SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_PTRACE"}}
		}), want: "spec.containers[0].securityContext differ"},
		{name: "AllowPrivilegeEscalation", mutate: ctr(func(c *corev1.Container) { c.SecurityContext.AllowPrivilegeEscalation = ptr.To(true) }),
			want: "spec.containers[0].securityContext differ"},
		{name: "SeccompUnconfined", mutate: ctr(func(c *corev1.Container) {
			c.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}), want: "spec.containers[0].securityContext differ"},
		{name: "PodSELinuxType", mutate: func(p *corev1.Pod, _ string) {
			p.Spec.SecurityContext.SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"}
		}, want: "spec.securityContext differ"},
		{name: "AppArmorAnnotation", mutate: func(p *corev1.Pod, _ string) {
			p.Annotations["container.apparmor.security.beta.kubernetes.io/mps-control-daemon"] = "unconfined"
		}, want: "metadata.annotations differ"},
		{name: "HostNetwork", mutate: func(p *corev1.Pod, _ string) { p.Spec.HostNetwork = true }, want: "spec.hostNetwork differ"},
		{name: "HostIPC", mutate: func(p *corev1.Pod, _ string) { p.Spec.HostIPC = true }, want: "spec.hostIPC differ"},
		{name: "RuntimeClass", mutate: func(p *corev1.Pod, _ string) { p.Spec.RuntimeClassName = ptr.To("nvidia") }, want: "spec.runtimeClassName differ"},
		{name: "HostPathRoot", mutate: withHostPath("host", func(string) string { return "/" }), want: "spec.volumes differ"},
		{name: "HostPathEtc", mutate: withHostPath("etc", func(string) string { return "/etc" }), want: "spec.volumes differ"},
		{name: "HostPathKubeletPlugins", mutate: withHostPath("plugins", filepath.Dir), want: "spec.volumes differ"},
		{name: "HostPathPluginDirSibling", mutate: withHostPath("sibling", func(d string) string { return d + "-evil" }), want: "spec.volumes differ"},
		{name: "HostPathBacksteps", mutate: withHostPath("up", func(d string) string { return d + "/mps/../../../../../etc" }), want: "spec.volumes differ"},
		// Issue 46, H1: the daemon's shm link (a symlink to its pod's
		// /dev/shm, writable by every MPS tenant) mounted over /usr/bin.
		{name: "ShmLinkOverUsrBin", mutate: func(p *corev1.Pod, pluginDir string) {
			mount(hostPath("bin", filepath.Join(pluginDir, "mps", uuid, "shm")), corev1.VolumeMount{Name: "bin", MountPath: "/usr/bin"})(p, pluginDir)
		}, want: "spec.volumes differ"},
		// The daemon's own directory, mounted again over the binary.
		{name: "OwnDirOverBinary", mutate: ctr(func(c *corev1.Container) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "mps", MountPath: "/usr/bin/gpu-kubelet-plugin", SubPath: "daemon.pid"})
		}), want: "spec.containers[0].volumeMounts differ"},
		{name: "SubPathOverBinary", mutate: onMount(func(m *corev1.VolumeMount) { m.SubPath = "../../simulated/bin/nvidia-smi" }),
			want: "spec.containers[0].volumeMounts differ"},
		{name: "SubPathExpr", mutate: onMount(func(m *corev1.VolumeMount) { m.SubPathExpr = "$(POD_NAME)" }), want: "spec.containers[0].volumeMounts differ"},
		{name: "BidirectionalPropagation", mutate: onMount(func(m *corev1.VolumeMount) { m.MountPropagation = ptr.To(corev1.MountPropagationBidirectional) }),
			want: "spec.containers[0].volumeMounts differ"},
		{name: "DriverRootSubPathShOverBinary", mutate: ctr(func(c *corev1.Container) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "driver-root", MountPath: "/usr/bin/gpu-kubelet-plugin", SubPath: "bin/sh", ReadOnly: true})
		}), want: "spec.containers[0].volumeMounts differ", skip: "SimulatedFiles"},
		{name: "DriverRootSubPathKubeletPods", mutate: ctr(func(c *corev1.Container) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "driver-root", MountPath: "/pods", SubPath: "var/lib/kubelet/pods", ReadOnly: true})
		}), want: "spec.containers[0].volumeMounts differ", skip: "SimulatedFiles"},
		{name: "SecretVolume", mutate: addVolume(corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "gpu-dra-driver-webhook-tls"}}}, "/tls"), want: "spec.volumes differ"},
		{name: "TokenVolume", mutate: addVolume(corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}, "/token"), want: "spec.volumes differ"},
		{name: "ConfigMapVolume", mutate: addVolume(corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}, "/cm"), want: "spec.volumes differ"},
		{name: "ShmWithoutSizeLimit", mutate: func(p *corev1.Pod, _ string) {
			for i := range p.Spec.Volumes {
				if p.Spec.Volumes[i].EmptyDir != nil {
					p.Spec.Volumes[i].EmptyDir.SizeLimit = nil
				}
			}
		}, want: "spec.volumes differ"},
		{name: "WebhookServiceAccount", mutate: func(p *corev1.Pod, _ string) { p.Spec.ServiceAccountName = "gpu-dra-driver-webhook" },
			want: "spec.serviceAccountName differ"},
		{name: "AutomountedToken", mutate: func(p *corev1.Pod, _ string) { p.Spec.AutomountServiceAccountToken = ptr.To(true) }, want: "spec.automountServiceAccountToken differ"},
		// The chart's class is system-node-critical (issue 55: the plugin
		// names it, so that a cluster's default class never replaces it).
		{name: "AnotherPriorityClass", mutate: func(p *corev1.Pod, _ string) { p.Spec.PriorityClassName = "system-cluster-critical" }, want: "spec.priorityClassName differ"},
		{name: "NoPriorityClass", mutate: func(p *corev1.Pod, _ string) { p.Spec.PriorityClassName = "" }, want: "spec.priorityClassName differ"},
		{name: "HigherPriority", mutate: func(p *corev1.Pod, _ string) { p.Spec.Priority = ptr.To[int32](2000001001) }, want: "spec.priority differ"},
		{name: "HugeRequests", mutate: ctr(func(c *corev1.Container) {
			c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000"), corev1.ResourceMemory: resource.MustParse("1Ti")}
		}), want: "spec.containers[0].resources differ"},
		{name: "Finalizer", mutate: func(p *corev1.Pod, _ string) { p.Finalizers = []string{"example.com/never"} }, want: "metadata.finalizers differ"},
		{name: "OwnerReference", mutate: func(p *corev1.Pod, _ string) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "gpu-dra-driver-kubelet-plugin", UID: "u"}}
		}, want: "metadata.ownerReferences differ"},
		{name: "HostAliases", mutate: func(p *corev1.Pod, _ string) {
			p.Spec.HostAliases = []corev1.HostAlias{{IP: "10.0.0.1", Hostnames: []string{"kubernetes.default"}}}
		}, want: "spec.hostAliases differ"},
		{name: "DNSConfig", mutate: func(p *corev1.Pod, _ string) {
			p.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"10.0.0.1"}}
		}, want: "spec.dnsConfig differ"},
		{name: "ImagePullSecretOfTheWebhook", mutate: func(p *corev1.Pod, _ string) {
			p.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "gpu-dra-driver-webhook-tls"}}
		}, want: "spec.imagePullSecrets differ"},
		{name: "TerminationMessagePath", mutate: ctr(func(c *corev1.Container) { c.TerminationMessagePath = "/driver-root/etc/passwd" }),
			want: "spec.containers[0].terminationMessagePath differ"},
		{name: "OtherImage", mutate: ctr(func(c *corev1.Container) { c.Image = "busybox" }), want: "spec.containers[0].image differ"},
		{name: "OtherCommand", mutate: ctr(func(c *corev1.Container) { c.Command = []string{"/bin/sh", "-c", "cat /etc/shadow"} }), want: "spec.containers[0].command differ"},
		{name: "OtherSubcommand", mutate: ctr(func(c *corev1.Container) { c.Args = []string{"--driver-name=x"} }), want: "args must be mps-control-daemon --device=" + uuid},
		{name: "OtherDriverRootFlag", mutate: ctr(func(c *corev1.Container) { c.Args = append(c.Args, "--driver-root=/mps") }), want: "--driver-root=/mps"},
		{name: "ForeignFlag", mutate: ctr(func(c *corev1.Container) { c.Args = append(c.Args, "--log-file=/mps/x") }), want: "--log-file=/mps/x"},
		{name: "ShellPayloadInAllowedFlag", mutate: ctr(func(c *corev1.Container) {
			c.Args = append(c.Args, "--default-active-thread-percentage=$(touch /tmp/pwned)")
		}), want: "--default-active-thread-percentage=$(touch /tmp/pwned)"},
		{name: "DeviceFlagDisagreesWithAnnotation", mutate: ctr(func(c *corev1.Container) { c.Args[1] = "--device=GPU-other" }), want: "--device=GPU-other"},
		{name: "DeviceDirOfAnotherDevice", mutate: func(p *corev1.Pod, pluginDir string) {
			p.Spec.Volumes[0].HostPath.Path = filepath.Join(pluginDir, "mps", "GPU-other")
		}, want: "spec.volumes differ"},
		{name: "EnvFromSecret", mutate: ctr(func(c *corev1.Container) {
			c.Env = []corev1.EnvVar{{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "gpu-dra-driver-webhook-tls"}, Key: "tls.key"}}}}
		}), want: "spec.containers[0].env differ"},
		{name: "PostStartHook", mutate: ctr(func(c *corev1.Container) {
			c.Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"id"}}}}
		}), want: "spec.containers[0].lifecycle differ"},
		{name: "ExecProbe", mutate: ctr(func(c *corev1.Container) {
			c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"id"}}}}
		}), want: "spec.containers[0].livenessProbe differ"},
		{name: "InitContainer", mutate: func(p *corev1.Pod, _ string) {
			c := p.Spec.Containers[0]
			c.Name = "init"
			p.Spec.InitContainers = []corev1.Container{c}
		}, want: "spec.initContainers differ"},
		{name: "SecondContainer", mutate: func(p *corev1.Pod, _ string) {
			c := p.Spec.Containers[0]
			c.Name = "second"
			p.Spec.Containers = append(p.Spec.Containers, c)
		}, want: "spec.containers differ"},
		{name: "DriverRootWritable", mutate: func(p *corev1.Pod, _ string) {
			for i := range p.Spec.Containers[0].VolumeMounts {
				if p.Spec.Containers[0].VolumeMounts[i].MountPath == "/driver-root" {
					p.Spec.Containers[0].VolumeMounts[i].ReadOnly = false
				}
			}
		}, want: "spec.containers[0].volumeMounts differ", skip: "SimulatedFiles"},
	}
	for _, m := range policyModes {
		t.Run(m.name, func(t *testing.T) {
			policy := mpsPolicy(t, m.set...)
			legit, pluginDir := daemonPod(t, m.set...)
			for _, a := range attacks {
				if strings.Contains(a.skip, m.name) {
					continue
				}
				p := legit.DeepCopy()
				a.mutate(p, pluginDir)
				matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: p})
				requireDenied(t, a.name, matched, denials, a.want)
			}
		})
	}
}

// The pod of issue 42, all at once; a token without a node; updates; and
// deleting what is not a daemon pod of the token's node.
func TestChartMPSPolicyOperations(t *testing.T) {
	policy := mpsPolicy(t)
	legit, _ := daemonPod(t)
	issuePod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stolen-token", Namespace: "gpu-dra-driver"},
		Spec: corev1.PodSpec{
			NodeName: otherNode, HostPID: true, ServiceAccountName: "gpu-dra-driver-webhook",
			Volumes: []corev1.Volume{
				{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "gpu-dra-driver-webhook-tls"}}},
			},
			Containers: []corev1.Container{{Name: "root", Image: "busybox", Command: []string{"sleep", "3600"},
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
				VolumeMounts:    []corev1.VolumeMount{{Name: "host", MountPath: "/host"}, {Name: "tls", MountPath: "/tls"}}}},
		},
	}
	matched, denials := admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, nodeName: ownNode, object: issuePod})
	requireDenied(t, "issue 42's pod", matched, denials, "spec.nodeName node-a, not node-b")
	requireDenied(t, "issue 42's pod", matched, denials, "spec.volumes")
	requireDenied(t, "issue 42's pod", matched, denials, "spec.containers[0].command")

	// Anyone else is not this policy's business.
	matched, _ = admit(t, policy, admissionRequest{operation: "CREATE", username: "system:serviceaccount:gpu-dra-driver:gpu-dra-driver-webhook", nodeName: ownNode, object: issuePod})
	if matched {
		t.Error("the policy matched a pod created by another user")
	}

	matched, denials = admit(t, policy, admissionRequest{operation: "CREATE", username: pluginUser, object: legit})
	requireDenied(t, "a token without a node", matched, denials, "this token carries no node")

	matched, denials = admit(t, policy, admissionRequest{operation: "UPDATE", username: pluginUser, nodeName: ownNode, object: legit, oldObject: legit})
	requireDenied(t, "updating its daemon pod", matched, denials, "may not update pod")

	onOther := legit.DeepCopy()
	onOther.Spec.NodeName = otherNode
	matched, denials = admit(t, policy, admissionRequest{operation: "DELETE", username: pluginUser, nodeName: ownNode, oldObject: onOther})
	requireDenied(t, "deleting another node's daemon pod", matched, denials, "spec.nodeName node-a, not node-b")

	webhookPod := issuePod.DeepCopy()
	webhookPod.Spec.NodeName = ownNode
	webhookPod.Labels = map[string]string{"app.kubernetes.io/component": "webhook"}
	matched, denials = admit(t, policy, admissionRequest{operation: "DELETE", username: pluginUser, nodeName: ownNode, oldObject: webhookPod})
	requireDenied(t, "deleting the webhook's pod on its node", matched, denials, "not webhook")
}

// The policy and its Deny binding ship with MPS, and only with it (without
// MPS the plugin may create no pods: templates/mps-rbac.yaml).
func TestChartMPSPolicyBoundWithMPS(t *testing.T) {
	policy := mpsPolicy(t)
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionv1.Fail {
		t.Errorf("failurePolicy %v, want Fail", policy.Spec.FailurePolicy)
	}
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	renderKind(t, "ValidatingAdmissionPolicyBinding", "-mps-daemon-pods", &binding)
	if binding.Spec.PolicyName != policy.Name || len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionv1.Deny {
		t.Errorf("binding %+v, want Deny for %s", binding.Spec, policy.Name)
	}
	out := string(helmTemplate(t, "sharing.strategies={TimeSlicing}"))
	if strings.Contains(out, "-mps-daemon-pods") || strings.Contains(out, "-mps-daemons") {
		t.Error("without MPS the chart still renders the MPS daemon pods' RBAC or policy")
	}
}

// The slice policy: this driver's slices of the token's node only.
func TestChartSlicePolicyChecksDriverAndNode(t *testing.T) {
	var policy admissionv1.ValidatingAdmissionPolicy
	renderKind(t, "ValidatingAdmissionPolicy", "-resourceslices-own-node", &policy, "driverName="+testDriver)
	slice := func(driver, node string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-" + driver},
			Spec: resourceapi.ResourceSliceSpec{Driver: driver, NodeName: ptr.To(node),
				Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1}},
		}
	}
	for _, op := range []string{"CREATE", "UPDATE", "DELETE"} {
		req := func(s *resourceapi.ResourceSlice) admissionRequest {
			r := admissionRequest{operation: op, username: pluginUser, nodeName: ownNode}
			if op != "DELETE" {
				r.object = s
			}
			if op != "CREATE" {
				r.oldObject = s
			}
			return r
		}
		if matched, denials := admit(t, policy, req(slice(testDriver, ownNode))); !matched || len(denials) > 0 {
			t.Errorf("%s of its own slice: matched %v, denied: %v", op, matched, denials)
		}
		matched, denials := admit(t, policy, req(slice("other.example.com", ownNode)))
		requireDenied(t, op+" of another driver's slice", matched, denials, "spec.driver gpu.example.com, not other.example.com")
		matched, denials = admit(t, policy, req(slice(testDriver, otherNode)))
		requireDenied(t, op+" of another node's slice", matched, denials, "may not modify ResourceSlices of node node-b")
		// Issue 46: its own node's slice in another node's pool.
		inOtherPool := slice(testDriver, ownNode)
		inOtherPool.Spec.Pool.Name = otherNode
		matched, denials = admit(t, policy, req(inOtherPool))
		requireDenied(t, op+" of a slice in another node's pool", matched, denials, "pool node-a (its node's pool), not node-b")
	}
}
