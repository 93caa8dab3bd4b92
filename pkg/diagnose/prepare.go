// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/clusterview"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/metrics/metricname"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/prepare/step"
)

// prepareVerdict explains a pod that is bound to a node but not running:
// the kubelet must have the plugin prepare its claims (config, MIG, CDI
// spec) before containerd can start the containers.
func prepareVerdict(r *Report, s *clusterview.Snapshot, pod *corev1.Pod) {
	node := pod.Spec.NodeName
	p := &PrepareReport{Node: node}
	r.Prepare = p
	plugin, state := pluginOn(s, node)
	if plugin != nil {
		p.PluginPod = plugin.Namespace + "/" + plugin.Name
	}
	p.PluginState = state
	p.Registered = registeredOn(s, node)
	p.Metrics = pluginMetrics(s.PluginMetrics[node])
	var lastPrepare, lastCDI string
	for _, e := range s.EventsFor("Pod", pod.Namespace, pod.Name) {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		p.Events = append(p.Events, fmt.Sprintf("%s (x%d): %s", e.Reason, max(e.Count, 1), e.Message))
		switch {
		case e.Reason == "FailedPrepareDynamicResources":
			lastPrepare = e.Message
		case strings.Contains(e.Message, "CDI"):
			lastCDI = e.Message
		}
	}
	fail := func(failed, verdict string) {
		p.Step = failed
		r.Status, r.Verdict = Blocked, fmt.Sprintf("pod %s is scheduled to node %s but cannot start: %s", pod.Name, node, verdict)
	}
	_, _, fromPlugin := step.Parse(lastPrepare) // the plugin's own error, with its step
	switch {
	case plugin == nil:
		fail("plugin", noPluginReason(s, node))
	case !strings.HasPrefix(state, "Running, ready"):
		fail("plugin", fmt.Sprintf("the driver's plugin pod %s is %s, so nothing prepares the claims; see kubectl logs -n %s %s", p.PluginPod, state, plugin.Namespace, plugin.Name))
	case !fromPlugin && strings.Contains(lastPrepare, "is not registered"): // the kubelet's words
		fail("registration", fmt.Sprintf("the kubelet reports the DRA driver %s as not registered (plugin pod %s is %s); the plugin registers through %s/plugins_registry: check the chart's kubeletDir and the plugin's logs", s.DriverName, p.PluginPod, state, "<kubeletDir>"))
	case lastPrepare != "":
		fail(classifyPrepareError(lastPrepare))
	case lastCDI != "":
		fail("cdi", "containerd cannot find the CDI devices the plugin returned ("+lastCDI+"); the CDI spec is missing under the chart's cdiRoot (/var/run/cdi) or containerd's enable_cdi is off")
	case p.Registered == "no":
		fail("registration", fmt.Sprintf("the kubelet has not registered the DRA driver %s although plugin pod %s is %s", s.DriverName, p.PluginPod, state))
	default:
		r.Status = Unknown
		r.Verdict = fmt.Sprintf("pod %s is scheduled to node %s and its claims are allocated; the plugin is %s and no prepare failure has been reported yet (phase %s)", pod.Name, node, state, pod.Status.Phase)
	}
}

// classifyPrepareError names the prepare step a FailedPrepareDynamicResources
// message comes from, by the step marker the plugin puts in its errors
// (pkg/prepare/step), and says what to do. A message without a marker (a
// plugin older than the marker) gets the generic step "prepare".
func classifyPrepareError(msg string) (failed, verdict string) {
	s, detail, ok := step.Parse(msg)
	if !ok {
		return "prepare", "the plugin failed to prepare its claims: " + lastPart(msg)
	}
	if a, ok := stepAdvice[s]; ok {
		return string(s), a.what + detail + a.then
	}
	// A step of a newer plugin.
	return string(s), fmt.Sprintf("the plugin failed to prepare its claims in step %s: %s", s, detail)
}

// stepAdvice says, per prepare step, what failed (before the plugin's
// detail) and what to do (after it).
var stepAdvice = map[step.Step]struct{ what, then string }{
	step.Claim:      {"the claim cannot be prepared as allocated: ", ". Fix the claim's requests (or its template) and recreate the pod"},
	step.Fence:      {"the plugin pod that answered is being replaced by a newer one: ", ". The kubelet retries with the new plugin pod; wait for the rolling update to finish"},
	step.Checkpoint: {"the plugin's checkpoint could not record the claim: ", ". See the plugin's logs"},
	step.Restore:    {"restoring the claim's devices after a node reboot or GPU reset failed: ", ". Delete the pod so that its claim is allocated again"},
	step.Rollback:   {"undoing an earlier, unfinished prepare of the claim failed: ", ". The kubelet retries; see the plugin's logs"},
	step.Config:     {"the claim's opaque config is invalid: ", ". Fix that field in the ResourceClaim (or its template) and recreate the pod"},
	step.Device:     {"the allocated device is gone from the node: ", ". Delete the pod so that its claim is allocated again"},
	step.Reserve:    {"the allocated device is in use by another claim prepared on the node: ", ". Run `gpudra diagnose node` to see which claims hold the node's devices"},
	step.MIG:        {"configuring MIG failed: ", ". Run `gpudra diagnose node` and check the GPU's MIG state (nvidia-smi mig -lgi)"},
	step.Sharing:    {"setting up GPU sharing (time slice or MPS) failed: ", ""},
	step.CDI:        {"writing the CDI spec failed: ", ". Check the plugin's CDI directory (chart value cdiRoot) and its logs"},
}

// lastPart drops the kubelet's wrapping ("Failed to prepare dynamic
// resources: NodePrepareResources failed for ResourceClaim x: ").
func lastPart(msg string) string {
	if i := strings.Index(msg, "NodePrepareResources failed for ResourceClaim "); i >= 0 {
		rest := msg[i+len("NodePrepareResources failed for ResourceClaim "):]
		if j := strings.Index(rest, ": "); j >= 0 {
			return rest[j+2:]
		}
	}
	return strings.TrimPrefix(msg, "Failed to prepare dynamic resources: ")
}

// pluginOn returns the driver's plugin pod on a node and its state.
func pluginOn(s *clusterview.Snapshot, node string) (*corev1.Pod, string) {
	pods := s.PluginPodsOn(node)
	if len(pods) == 0 {
		return nil, "absent"
	}
	// During a rolling update two pods run; prefer a ready one.
	best := pods[0]
	for _, p := range pods {
		if podReady(p) {
			best = p
		}
	}
	return best, podState(best)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState renders a plugin pod's phase, readiness, restarts and the
// reason a container is waiting or last died.
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	if p.DeletionTimestamp != nil {
		s += " (terminating)"
	}
	if podReady(p) {
		s += ", ready"
	} else {
		s += ", not ready"
	}
	for _, st := range p.Status.ContainerStatuses {
		if st.RestartCount > 0 {
			s += fmt.Sprintf(", %d restarts", st.RestartCount)
		}
		if w := st.State.Waiting; w != nil && w.Reason != "" {
			s += ", waiting: " + w.Reason
		}
		if t := st.LastTerminationState.Terminated; t != nil && !podReady(p) {
			s += fmt.Sprintf(", last exit %d (%s)", t.ExitCode, t.Reason)
			if t.Message != "" {
				s += ": " + t.Message
			}
		}
	}
	return s
}

func registeredOn(s *clusterview.Snapshot, node string) string {
	var uids []types.UID
	for _, p := range s.PluginPodsOn(node) {
		uids = append(uids, p.UID)
	}
	if text, ok := s.KubeletMetrics[node]; ok {
		if r := registered(text, s.DriverName, uids); r != "unknown" {
			return r
		}
	}
	// The plugin's own view: the kubelet's last registration status.
	if f := parseMetrics(s.PluginMetrics[node])[metricname.KubeletRegistered]; f != nil && len(f.Metric) > 0 {
		if sampleValue(f.Metric[0]) > 0 {
			return "yes"
		}
		return "no"
	}
	return "unknown"
}

// noPluginReason explains why no plugin pod runs on a node: the
// DaemonSet's node affinity (GPU node labels) or a missing installation.
func noPluginReason(s *clusterview.Snapshot, node string) string {
	if len(s.PluginDaemonSets) == 0 {
		return fmt.Sprintf("no plugin pod of the driver runs on node %s and no gpu-dra-driver DaemonSet was found: install the chart (deployments/helm/gpu-dra-driver)", node)
	}
	n := s.Node(node)
	for _, ds := range s.PluginDaemonSets {
		probe := &corev1.Pod{Spec: ds.Spec.Template.Spec}
		if n != nil {
			if ok, _ := nodeaffinity.GetRequiredNodeAffinity(probe).Match(n); !ok {
				return fmt.Sprintf("no plugin pod of the driver runs on node %s: DaemonSet %s/%s does not select it (%s). If the node has an NVIDIA GPU, label it (kubectl label node %s nvidia.com/gpu.present=true) or set the chart's kubeletPlugin.gpuNodeLabels",
					node, ds.Namespace, ds.Name, affinityText(probe), node)
			}
		}
	}
	ds := s.PluginDaemonSets[0]
	return fmt.Sprintf("no plugin pod of the driver runs on node %s although DaemonSet %s/%s selects it; check the node's taints against kubeletPlugin.tolerations and kubectl describe daemonset -n %s %s", node, ds.Namespace, ds.Name, ds.Namespace, ds.Name)
}

func affinityText(p *corev1.Pod) string {
	var terms []string
	if p.Spec.Affinity != nil && p.Spec.Affinity.NodeAffinity != nil && p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				terms = append(terms, fmt.Sprintf("%s %s %s", e.Key, e.Operator, strings.Join(e.Values, ",")))
			}
		}
	}
	for k, v := range p.Spec.NodeSelector {
		terms = append(terms, k+"="+v)
	}
	if len(terms) == 0 {
		return "node selection"
	}
	return "it needs one of: " + strings.Join(terms, "; ")
}
