// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/sharing"
)

// The chart's names for release gpu-dra-driver (hack/cluster/deploy.sh).
const (
	pluginSA         = "gpu-dra-driver-kubelet-plugin"
	podPolicyName    = "gpu-dra-driver-mps-daemon-pods"
	slicePolicyName  = "gpu-dra-driver-resourceslices-own-node"
	eventPolicyName  = "gpu-dra-driver-events-own-node"
	nodeNameExtraKey = "authentication.kubernetes.io/node-name"
)

// asPlugin is a client that the API server takes for the kubelet plugin's
// ServiceAccount with a token bound to a pod on node: the user, its groups
// and the node-name extra that a pod-bound token carries. Its requests go
// through the same RBAC and admission as a stolen plugin token's.
func asPlugin(t *testing.T, node string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + driverNS + ":" + pluginSA,
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + driverNS, "system:authenticated"},
		Extra:    map[string][]string{nodeNameExtraKey: {node}},
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// daemonPodShape is the MPS control-daemon pod the plugin on node creates,
// built by pkg/sharing's own constructor with what the running plugin was
// given (its image, and its host driver root in the devices node mode), so
// the test follows the code.
func daemonPodShape(t *testing.T, node string) *corev1.Pod {
	t.Helper()
	plugin := runningPluginPod(t)
	r := &sharing.PodRunner{Namespace: driverNS, NodeName: node}
	for _, c := range plugin.Spec.Containers {
		if c.Name != "plugin" {
			continue
		}
		for _, e := range c.Env {
			if e.Name == "MPS_DAEMON_IMAGE" {
				r.Image = e.Value
			}
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, "--host-driver-root="); ok {
				r.HostDriverRoot = v
				// The devices node mode (cmd/gpu-kubelet-plugin, complete).
				r.DaemonDefaults = true
			}
		}
	}
	if r.Image == "" {
		t.Fatalf("plugin pod %s has no MPS_DAEMON_IMAGE: is MPS in sharing.strategies?", plugin.Name)
	}
	uuid := "GPU-00000000-0000-0000-0000-0000000000a1"
	return r.Pod(&sharing.Daemon{DeviceUUID: uuid, Dir: filepath.Join(stateDir(), "mps", uuid),
		Defaults: sharing.Settings{ActiveThreadPercentage: 50}})
}

func runningPluginPod(t *testing.T) *corev1.Pod {
	t.Helper()
	for _, p := range pluginPodList(t) {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			return &p
		}
	}
	t.Fatal("no plugin pod bound to a node")
	return nil
}

var dryRun = metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// refusedBy fails t unless err is policy's denial.
func refusedBy(t *testing.T, err error, policy, what string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: accepted, want it refused by ValidatingAdmissionPolicy %s", what, policy)
	case !strings.Contains(err.Error(), policy):
		t.Errorf("%s: refused, but not by ValidatingAdmissionPolicy %s: %v", what, policy, err)
	default:
		t.Logf("%s: %v", what, err)
	}
}

// TestPluginTokenConfinedByPolicy tries, as a stolen kubelet-plugin token of
// this node would, what issue 42 found it could do: create a pod on another
// node, privileged, with the host's root, the webhook's TLS Secret and the
// webhook's ServiceAccount; publish devices of another driver; post events
// about another node. Server-
// side dry runs only: each attack alone on top of the MPS daemon pod the
// plugin really creates must be refused by the chart's admission policy,
// and that pod itself accepted.
func TestPluginTokenConfinedByPolicy(t *testing.T) {
	ctx := context.Background()
	node := runningPluginPod(t).Spec.NodeName
	plugin := asPlugin(t, node)
	pods := plugin.CoreV1().Pods(driverNS)
	legit := daemonPodShape(t, node)
	privileged := ptr.Deref(legit.Spec.Containers[0].SecurityContext.Privileged, false)

	t.Run("DaemonPodAccepted", func(t *testing.T) {
		if _, err := pods.Create(ctx, legit.DeepCopy(), dryRun); err != nil {
			t.Fatalf("the MPS daemon pod the plugin creates (pkg/sharing PodRunner.Pod) was refused: %v", err)
		}
	})

	pluginDir := stateDir()
	hostPath := func(name, path string) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path}}}
	}
	addVolume := func(v corev1.Volume, mountPath string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v)
			c := &p.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: mountPath})
		}
	}
	attacks := []struct {
		name   string
		skip   string // why the row does not apply to this deployment
		mutate func(*corev1.Pod)
	}{
		{name: "AnotherNode", mutate: func(p *corev1.Pod) { p.Spec.NodeName = node + "-other" }},
		{name: "NoNodeName", mutate: func(p *corev1.Pod) { p.Spec.NodeName = "" }},
		{name: "Privileged", skip: map[bool]string{true: "the daemon pod is privileged in this node mode"}[privileged],
			mutate: func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true) }},
		{name: "CapabilityAdded", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities = &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}
		}},
		{name: "HostNetwork", mutate: func(p *corev1.Pod) { p.Spec.HostNetwork = true }},
		{name: "HostIPC", mutate: func(p *corev1.Pod) { p.Spec.HostIPC = true }},
		{name: "HostPathRoot", mutate: addVolume(hostPath("host", "/"), "/host")},
		{name: "HostPathKubeletPlugins", mutate: addVolume(hostPath("plugins", filepath.Dir(pluginDir)), "/plugins")},
		{name: "HostPathSiblingOfPluginDir", mutate: addVolume(hostPath("sibling", pluginDir+"-evil"), "/sibling")},
		{name: "SecretVolume", mutate: addVolume(corev1.Volume{Name: "tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: webhookName + "-tls"}}}, "/tls")},
		{name: "TokenVolume", mutate: addVolume(corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
				ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}, "/token")},
		{name: "ConfigMapVolume", mutate: addVolume(corev1.Volume{Name: "cm", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}}}, "/cm")},
		{name: "WebhookServiceAccount", mutate: func(p *corev1.Pod) { p.Spec.ServiceAccountName = webhookName }},
		{name: "AutomountedToken", mutate: func(p *corev1.Pod) { p.Spec.AutomountServiceAccountToken = ptr.To(true) }},
		{name: "OtherImage", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "localhost/busybox:latest" }},
		{name: "OtherCommand", mutate: func(p *corev1.Pod) { p.Spec.Containers[0].Command = []string{"/bin/sh", "-c", "cat /etc/shadow"} }},
		{name: "OtherSubcommand", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Args = []string{"--driver-name=" + driverName, "--node-name=" + node}
		}},
		{name: "EnvFromSecret", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: webhookName + "-tls"}, Key: "tls.key"}}}}
		}},
		{name: "PostStartHook", mutate: func(p *corev1.Pod) {
			p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "id"}}}}
		}},
		{name: "InitContainer", mutate: func(p *corev1.Pod) {
			c := p.Spec.Containers[0]
			c.Name = "init"
			c.Image = "localhost/busybox:latest"
			p.Spec.InitContainers = []corev1.Container{c}
		}},
	}
	for _, a := range attacks {
		t.Run("Refuses"+a.name, func(t *testing.T) {
			if a.skip != "" {
				t.Skip(a.skip)
			}
			p := legit.DeepCopy()
			a.mutate(p)
			_, err := pods.Create(ctx, p, dryRun)
			refusedBy(t, err, podPolicyName, "daemon pod with "+a.name)
		})
	}

	// Everything issue 42 found at once.
	t.Run("RefusesTheIssuesPod", func(t *testing.T) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "stolen-token", Namespace: driverNS},
			Spec: corev1.PodSpec{
				NodeName:           node + "-other",
				HostPID:            true,
				ServiceAccountName: webhookName,
				Volumes: []corev1.Volume{hostPath("host", "/"), {Name: "tls", VolumeSource: corev1.VolumeSource{
					Secret: &corev1.SecretVolumeSource{SecretName: webhookName + "-tls"}}}},
				Containers: []corev1.Container{{
					Name: "root", Image: "localhost/busybox:latest", Command: []string{"sleep", "3600"},
					SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
					VolumeMounts:    []corev1.VolumeMount{{Name: "host", MountPath: "/host"}, {Name: "tls", MountPath: "/tls"}},
				}},
			},
		}
		_, err := pods.Create(ctx, p, dryRun)
		refusedBy(t, err, podPolicyName, "issue 42's pod")
	})

	t.Run("RefusesDeletingOtherPods", func(t *testing.T) {
		// The webhook's pods run on this node too, in the same namespace.
		list, err := client.CoreV1().Pods(driverNS).List(ctx, metav1.ListOptions{LabelSelector: webhookPods})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("webhook pods: %v (%d)", err, len(list.Items))
		}
		err = pods.Delete(ctx, list.Items[0].Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		refusedBy(t, err, podPolicyName, "deleting webhook pod "+list.Items[0].Name)
	})

	// Events: the plugin's own kind is admitted, one about another node not.
	event := func(about string) *corev1.Event {
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: about + ".", Namespace: metav1.NamespaceDefault},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: about, APIVersion: "v1"},
			Reason:         "PolicyProbe", Message: "dry run", Type: corev1.EventTypeNormal,
			Source: corev1.EventSource{Component: "gpu-kubelet-plugin", Host: node},
		}
	}
	events := plugin.CoreV1().Events(metav1.NamespaceDefault)
	t.Run("EventOnItsNodeAccepted", func(t *testing.T) {
		if _, err := events.Create(ctx, event(node), dryRun); err != nil {
			t.Fatalf("an event on its own Node %s was refused: %v", node, err)
		}
	})
	t.Run("RefusesEventOnAnotherNode", func(t *testing.T) {
		_, err := events.Create(ctx, event(node+"-other"), dryRun)
		refusedBy(t, err, eventPolicyName, "event on Node "+node+"-other")
	})

	slices := plugin.ResourceV1().ResourceSlices()
	slice := func(driver string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "policy-probe-"},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   driver,
				NodeName: ptr.To(node),
				Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
				Devices:  []resourceapi.Device{{Name: "gpu-0"}},
			},
		}
	}
	t.Run("SliceOfTheDriverAccepted", func(t *testing.T) {
		if _, err := slices.Create(ctx, slice(driverName), dryRun); err != nil {
			t.Fatalf("a ResourceSlice of %s on node %s was refused: %v", driverName, node, err)
		}
	})
	t.Run("RefusesSliceOfAnotherDriver", func(t *testing.T) {
		_, err := slices.Create(ctx, slice("other.example.com"), dryRun)
		refusedBy(t, err, slicePolicyName, fmt.Sprintf("ResourceSlice of driver other.example.com on node %s", node))
	})
}
