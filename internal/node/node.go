// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package node runs one plugin in this process, on temporary directories,
// against an in-process API server stand-in (internal/fakeapi), and reaches
// it as the kubelet does: gRPC over its DRA socket. `gpudra demo`,
// `gpudra smoke prepare` and pkg/driver's own tests use it; the caller
// says how to start the plugin (Config.Start), so this package does not
// import pkg/driver and the driver's in-package tests can import it.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// SlicesTimeout is how long Start waits for the plugin's ResourceSlices,
// ReconcileTimeout for its first check of its claims against the API.
const (
	SlicesTimeout    = 10 * time.Second
	ReconcileTimeout = 30 * time.Second
)

// Dirs are the plugin's directories on the node.
type Dirs struct{ State, CDI, Plugin, Registry string }

// Plugin is a started plugin, as the node needs it (pkg/driver's *Driver).
type Plugin interface {
	// DRASocket is the path of the plugin's DRA gRPC socket.
	DRASocket() string
	Stop()
	// Reconciled reports whether the plugin has checked its prepared
	// claims against the API server; Start waits for it.
	Reconciled() bool
}

// StartFunc starts the plugin on the node's directories with client as its
// API server and be as its backend; the caller adds its own settings.
type StartFunc func(ctx context.Context, dirs Dirs, client kubernetes.Interface, be *backend.Backend) (Plugin, error)

// Config names the node and says how to start its plugin.
type Config struct {
	DriverName, NodeName string
	// NodeUID is the UID of the Node object in the API; optional.
	NodeUID types.UID
	Start   StartFunc
}

// Node is one in-process plugin. New makes its directories, the caller
// opens a backend on StateDir (and Dir for anything else it needs), Start
// starts the plugin; Stop stops it, Close also removes the directories.
type Node struct {
	Config
	// Root holds the node's directories: state, cdi, plugin, registry.
	Root string
	// Client is the in-process API server stand-in, holding the Node.
	Client *fake.Clientset
	// API, when set before Start, is the client the plugin gets instead
	// of Client (an API server that refuses or hangs); Start then waits
	// neither for slices nor for the plugin's reconciliation.
	API kubernetes.Interface
	// Backend and Plugin are set by Start.
	Backend *backend.Backend
	Plugin  Plugin
	// Slices are the ResourceSlices the plugin published, complete (every
	// slice of the pool), SlicesAfter how long after Start began.
	Slices      []*resourceapi.ResourceSlice
	SlicesAfter time.Duration
	// Conn is the connection to the plugin's DRA socket, Kubelet the DRA
	// client on it; set by Start.
	Conn    *grpc.ClientConn
	Kubelet drapb.DRAPluginClient
}

// New creates the node's directories under a new temporary directory.
func New(cfg Config) (*Node, error) {
	// Unix socket paths are limited to 108 bytes; keep the root short.
	root, err := os.MkdirTemp("", "gpudra-"+cfg.NodeName+"-")
	if err != nil {
		return nil, err
	}
	return NewAt(cfg, root), nil
}

// NewAt is a node on an existing root (e.g. with simulated state); the
// plugin creates the directories it needs.
func NewAt(cfg Config, root string) *Node {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName, UID: cfg.NodeUID}}
	return &Node{Config: cfg, Root: root, Client: fakeapi.NewClientset(node)}
}

// Dir is the node's directory called name.
func (n *Node) Dir(name string) string { return filepath.Join(n.Root, name) }

// StateDir is the plugin's --state-dir; CDIDir where it writes CDI specs.
func (n *Node) StateDir() string { return n.Dir("state") }
func (n *Node) CDIDir() string   { return n.Dir("cdi") }

// Dirs are the plugin's directories under Root.
func (n *Node) Dirs() Dirs {
	return Dirs{State: n.StateDir(), CDI: n.CDIDir(), Plugin: n.Dir("plugin"), Registry: n.Dir("registry")}
}

// Start starts the plugin on be with Config.Start, waits until its
// ResourceSlices are in the API (they are before the plugin's start
// returns) and it has reconciled its claims, and connects to its DRA
// socket. A node that was stopped can start again.
func (n *Node) Start(ctx context.Context, be *backend.Backend) error {
	if n.Plugin != nil {
		return errors.New("node already started")
	}
	if n.Config.Start == nil {
		return errors.New("node has no Config.Start")
	}
	n.Backend = be
	if n.API != nil {
		p, err := n.Config.Start(ctx, n.Dirs(), n.API, be)
		if err != nil {
			return err
		}
		n.Plugin = p
		return n.dial()
	}
	type publication struct {
		slices []*resourceapi.ResourceSlice
		after  time.Duration
		err    error
	}
	// Watch for the slices while the plugin starts.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	watched := make(chan publication, 1)
	go func() {
		s, err := waitForSlices(wctx, n.Client)
		watched <- publication{s, time.Since(start), err}
	}()
	p, err := n.Config.Start(ctx, n.Dirs(), n.Client, be)
	if err != nil {
		return err
	}
	n.Plugin = p
	pub := <-watched
	if pub.err != nil {
		return pub.err
	}
	n.Slices, n.SlicesAfter = pub.slices, pub.after
	for deadline := time.Now().Add(ReconcileTimeout); !p.Reconciled(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the plugin did not check its prepared claims against the API within %s", ReconcileTimeout)
		}
	}
	return n.dial()
}

func (n *Node) dial() error {
	conn, err := grpc.NewClient("unix://"+n.Plugin.DRASocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	n.Conn, n.Kubelet = conn, drapb.NewDRAPluginClient(conn)
	return nil
}

// Stop stops the plugin, if started, and keeps the directories.
func (n *Node) Stop() {
	if n.Conn != nil {
		_ = n.Conn.Close()
		n.Conn, n.Kubelet = nil, nil
	}
	if n.Plugin != nil {
		n.Plugin.Stop()
		n.Plugin = nil
	}
}

// Close stops the plugin, if started, and removes the node's directories.
func (n *Node) Close() {
	n.Stop()
	_ = os.RemoveAll(n.Root)
}

// Prepare puts the allocated claim into the API and prepares it over the
// DRA socket. A per-claim error is returned as is (the plugin's message).
func (n *Node) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) (*drapb.NodePrepareResourceResponse, error) {
	if n.Kubelet == nil {
		return nil, errors.New("node not started")
	}
	if _, err := n.Client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	claims, err := n.PrepareClaims(ctx, claim)
	if err != nil {
		return nil, err
	}
	r := claims[string(claim.UID)]
	if r == nil {
		return nil, fmt.Errorf("no answer for claim %s", claim.UID)
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	return r, nil
}

// PrepareClaims prepares claims already in the API in one call over the
// DRA socket and returns the answers by claim UID.
func (n *Node) PrepareClaims(ctx context.Context, claims ...*resourceapi.ResourceClaim) (map[string]*drapb.NodePrepareResourceResponse, error) {
	if n.Kubelet == nil {
		return nil, errors.New("node not started")
	}
	resp, err := n.Kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: KubeletClaims(claims...)})
	if err != nil {
		return nil, err
	}
	return resp.Claims, nil
}

// Unprepare unprepares the claims in one call over the DRA socket and
// returns the call's error or the claims' errors.
func (n *Node) Unprepare(ctx context.Context, claims ...*resourceapi.ResourceClaim) error {
	answers, err := n.UnprepareClaims(ctx, claims...)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range claims {
		if msg := answers[string(c.UID)].GetError(); msg != "" {
			errs = append(errs, fmt.Errorf("unprepare %s: %s", c.Name, msg))
		}
	}
	return errors.Join(errs...)
}

// UnprepareClaims unprepares the claims in one call over the DRA socket
// and returns the answers by claim UID.
func (n *Node) UnprepareClaims(ctx context.Context, claims ...*resourceapi.ResourceClaim) (map[string]*drapb.NodeUnprepareResourceResponse, error) {
	if n.Kubelet == nil {
		return nil, errors.New("node not started")
	}
	resp, err := n.Kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: KubeletClaims(claims...)})
	if err != nil {
		return nil, err
	}
	return resp.Claims, nil
}

// KubeletClaims are the claims as the kubelet names them to the plugin.
func KubeletClaims(claims ...*resourceapi.ResourceClaim) []*drapb.Claim {
	out := make([]*drapb.Claim, 0, len(claims))
	for _, c := range claims {
		out = append(out, &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)})
	}
	return out
}

// MigInstances counts the MIG devices on the simulated GPUs; 0 when the
// backend is not simulated.
func (n *Node) MigInstances() int {
	if n.Backend == nil || n.Backend.Simulator == nil {
		return 0
	}
	count := 0
	for _, g := range n.Backend.Inventory.GPUs {
		count += n.Backend.Simulator.MigInstanceCount(g.UUID)
	}
	return count
}

// Leftovers is what the node still holds of prepared claims.
type Leftovers struct {
	// CDISpecs and Records are the paths of the driver's claim specs and
	// checkpoint records.
	CDISpecs, Records []string
	// MigInstances counts MIG devices on simulated GPUs.
	MigInstances int
}

// Empty reports whether nothing is left.
func (l Leftovers) Empty() bool { return len(l.CDISpecs)+len(l.Records)+l.MigInstances == 0 }

// Leftovers lists what prepared claims left on the node: after every
// claim is unprepared, it must be Empty.
func (n *Node) Leftovers() (Leftovers, error) {
	specs, err := cdi.SpecFiles(n.CDIDir(), n.DriverName)
	if err != nil {
		return Leftovers{}, err
	}
	records, err := checkpoint.Files(checkpoint.Dir(n.StateDir()))
	if err != nil {
		return Leftovers{}, err
	}
	return Leftovers{CDISpecs: specs, Records: records, MigInstances: n.MigInstances()}, nil
}

// PublishedSlices waits, up to SlicesTimeout, until every slice the
// plugin's pool announces is in the API, and returns them.
func (n *Node) PublishedSlices(ctx context.Context) ([]*resourceapi.ResourceSlice, error) {
	return waitForSlices(ctx, n.Client)
}

// waitForSlices returns the slices in the API once every slice the pool
// announces is there.
func waitForSlices(ctx context.Context, client *fake.Clientset) ([]*resourceapi.ResourceSlice, error) {
	deadline := time.Now().Add(SlicesTimeout)
	for time.Now().Before(deadline) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		if resourceslices.CompletePool(list.Items) {
			out := make([]*resourceapi.ResourceSlice, 0, len(list.Items))
			for i := range list.Items {
				out = append(out, &list.Items[i])
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no ResourceSlice published within %s", SlicesTimeout)
}
