// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package diagnose

// Status is the outcome of a diagnosis.
type Status string

const (
	// OK: the pod runs with its devices, or the node serves its GPUs.
	OK Status = "ok"
	// Blocked: the tool found what blocks it; the verdict says what.
	Blocked Status = "blocked"
	// Unknown: the tool could not tell.
	Unknown Status = "unknown"
)

// Report is a diagnosis: a verdict first, then the evidence. It is also
// the `-o json` output.
type Report struct {
	Target  string         `json:"target"`
	Status  Status         `json:"status"`
	Verdict string         `json:"verdict"`
	Pod     *PodInfo       `json:"pod,omitempty"`
	Claims  []ClaimReport  `json:"claims,omitempty"`
	Prepare *PrepareReport `json:"prepare,omitempty"`
	Node    *NodeReport    `json:"node,omitempty"`
	// IncompletePools are pools whose slices are not all published; the
	// scheduler uses none of their devices.
	IncompletePools []string `json:"incompletePools,omitempty"`
	// Unreadable is what the tool could not read from the cluster.
	Unreadable []string `json:"unreadable,omitempty"`
}

// ExitCode is 0 when fine, 1 when the blocking cause was found, 2 when the
// tool could not tell.
func (r *Report) ExitCode() int {
	switch r.Status {
	case OK:
		return 0
	case Blocked:
		return 1
	}
	return 2
}

// PodInfo is what the pod itself says.
type PodInfo struct {
	Phase      string          `json:"phase"`
	Node       string          `json:"node,omitempty"`
	Scheduler  string          `json:"schedulerMessage,omitempty"` // the latest FailedScheduling event
	Containers []ContainerInfo `json:"containers"`
	// Nodes are, for a Pending pod whose claims can be allocated, the
	// scheduler's filters on each node (nodeFilters).
	Nodes []NodeFilter `json:"nodes,omitempty"`
}

// ContainerInfo is one container, the claims it uses and its state.
type ContainerInfo struct {
	Name   string   `json:"name"`
	Claims []string `json:"claims,omitempty"` // pod claim names (and requests) in resources.claims
	State  string   `json:"state"`
}

// ClaimReport is one ResourceClaim of the pod (or the claim diagnosed).
type ClaimReport struct {
	Name        string          `json:"name"` // namespace/name; empty before it exists
	PodClaim    string          `json:"podClaim,omitempty"`
	Allocated   bool            `json:"allocated"`
	Node        string          `json:"node,omitempty"`
	Devices     []string        `json:"devices,omitempty"` // pool/device of the allocation
	ReservedFor []string        `json:"reservedFor,omitempty"`
	DeviceInfo  []string        `json:"deviceStatus,omitempty"` // what the plugin wrote to status.devices
	Requests    []RequestReport `json:"requests,omitempty"`
	Allocator   string          `json:"allocator,omitempty"` // what the scheduler's allocator finds now
	Status      Status          `json:"status"`
	Problem     string          `json:"problem,omitempty"`
}

// RequestReport walks one request from published devices to free ones.
type RequestReport struct {
	Name       string `json:"name"`
	Class      string `json:"deviceClass"`
	ClassFound bool   `json:"deviceClassFound"`
	Mode       string `json:"allocationMode"`
	Count      int64  `json:"count,omitempty"`
	// AdminAccess requests may get devices other claims hold; only
	// tainted devices, capacity and shared counters block them.
	AdminAccess bool `json:"adminAccess,omitempty"`
	// Candidates are the devices in complete pools on nodes the pod may use.
	Candidates int            `json:"candidates"`
	Selectors  []SelectorStep `json:"selectors,omitempty"`
	Matching   int            `json:"matching"`
	// Allocated matching devices, by the claims that hold them.
	Allocated int           `json:"allocated"`
	Holders   []HolderCount `json:"holders,omitempty"`
	// CounterBlocked matching devices: free themselves, but the shared
	// counters of their GPU are taken (overlapping MIG placements, a GPU
	// allocated whole).
	CounterBlocked int            `json:"counterBlocked"`
	CounterBlocks  []CounterBlock `json:"counterBlocks,omitempty"`
	// CapacityFull shareable devices have too little capacity left.
	CapacityFull int      `json:"capacityFull"`
	Tainted      int      `json:"tainted"`
	Taints       []string `json:"taints,omitempty"`
	// TaintedDevices are the Tainted devices one by one.
	TaintedDevices []TaintedDevice `json:"taintedDevices,omitempty"`
	Free           int             `json:"free"`
	MaxFreeNode    string          `json:"maxFreeNode,omitempty"`
	MaxFree        int             `json:"maxFreeOnOneNode"`
	// FreeInClass lists, when too few matching devices are free, the
	// values free devices of the class have for the attributes the
	// request's selectors read: what could be asked for instead.
	FreeInClass map[string][]string `json:"freeInClass,omitempty"`
	Error       string              `json:"error,omitempty"`
}

// SelectorStep is one CEL selector (the class's first, then the
// request's) and how many devices still match after it.
type SelectorStep struct {
	Source     string    `json:"source"`
	Expression string    `json:"expression"`
	Left       int       `json:"left"`
	Error      string    `json:"error,omitempty"`
	NearMiss   *NearMiss `json:"nearMiss,omitempty"`
	// Offered lists, for each attribute the selector reads, the values
	// the devices before it have (most common first).
	Offered map[string][]string `json:"offered,omitempty"`
}

// NearMiss is a device that failed only this selector, or the fewest.
type NearMiss struct {
	Device string            `json:"device"`
	Values map[string]string `json:"values"`
}

// HolderCount is a claim holding some of the matching devices.
type HolderCount struct {
	Claim   string   `json:"claim"`
	Pods    []string `json:"pods,omitempty"`
	Devices []string `json:"devices"`
}

// CounterBlock is one GPU (counter set) whose matching placements are
// blocked, and by which allocated devices.
type CounterBlock struct {
	CounterSet string   `json:"counterSet"`
	Node       string   `json:"node,omitempty"`
	Blocked    int      `json:"blocked"`
	WholeGPU   bool     `json:"wholeGPU"`
	By         []string `json:"by"`      // allocated devices using the counters
	Holders    []string `json:"holders"` // their claims and pods
}

// PrepareReport is what happened after scheduling, on the node.
type PrepareReport struct {
	Node        string   `json:"node"`
	PluginPod   string   `json:"pluginPod,omitempty"`
	PluginState string   `json:"pluginState,omitempty"`
	Registered  string   `json:"registered"` // yes, no or unknown
	Events      []string `json:"events,omitempty"`
	Metrics     []string `json:"metrics,omitempty"`
	// Step is the step that failed: "plugin", "registration", one of
	// pkg/prepare/step's (from the marker in the plugin's error), or
	// "prepare" for a plugin error without a marker.
	Step string `json:"failedStep,omitempty"`
}

// NodeReport is the driver's state on one node.
type NodeReport struct {
	Name       string        `json:"name"`
	Ready      string        `json:"ready"`
	PluginPods []string      `json:"pluginPods,omitempty"`
	Registered string        `json:"registered"`
	Simulated  string        `json:"simulatedProfile,omitempty"`
	Pools      []string      `json:"pools,omitempty"`
	Devices    DeviceCounts  `json:"devices"`
	Claims     []NodeClaim   `json:"claims,omitempty"`
	Metrics    []string      `json:"metrics,omitempty"`
	Events     []string      `json:"events,omitempty"`
	Problems   []string      `json:"problems,omitempty"`
	ByType     []DeviceCount `json:"byType,omitempty"`
}

// DeviceCounts sums a node's published devices.
type DeviceCounts struct {
	Total          int `json:"total"`
	Allocated      int `json:"allocated"`
	CounterBlocked int `json:"counterBlocked"`
	Tainted        int `json:"tainted"`
	Free           int `json:"free"`
}

// DeviceCount is DeviceCounts for one device type (gpu, mig).
type DeviceCount struct {
	Type string `json:"type"`
	DeviceCounts
}

// NodeClaim is a claim allocated on the node.
type NodeClaim struct {
	Claim    string   `json:"claim"`
	Devices  []string `json:"devices"`
	Pods     []string `json:"pods,omitempty"`
	Prepared bool     `json:"prepared"` // the plugin wrote device status
}
