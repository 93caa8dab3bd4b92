// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package clusterview

// Status is the outcome of an analysis: of a claim, a pod, or (in
// pkg/diagnose) a whole diagnosis.
type Status string

const (
	// OK: nothing blocks it: a claim is allocated, a pod runs with its
	// devices, a node serves its GPUs.
	OK Status = "ok"
	// Blocked: what blocks it is found; the verdict or problem says what.
	Blocked Status = "blocked"
	// Unknown: it cannot be told.
	Unknown Status = "unknown"
)

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
