// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package node runs one plugin in this process, on temporary directories,
// against an in-process API server stand-in (internal/fakeapi), and reaches
// it as the kubelet does: gRPC over its DRA socket. `gpudra demo` and
// `gpudra smoke prepare` use it. pkg/driver's own tests keep a harness of
// their own: they are in package driver, which this package imports.
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
	"k8s.io/client-go/kubernetes/fake"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/gpu-dra-driver/gpu-dra-driver/internal/fakeapi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/backend"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/cdi"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/checkpoint"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/driver"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// SlicesTimeout is how long Start waits for the plugin's ResourceSlices.
const SlicesTimeout = 10 * time.Second

// Config names the node and what its plugin publishes.
type Config struct {
	DriverName, NodeName string
	Publish              resourceslices.Options
}

// Node is one in-process plugin. New makes its directories, the caller
// opens a backend on StateDir (and Dir for anything else it needs), Start
// starts the plugin; Close stops it and removes the directories.
type Node struct {
	Config
	// Root holds the node's directories: state, cdi, plugin, registry.
	Root string
	// Client is the in-process API server stand-in, holding the Node.
	Client *fake.Clientset
	// Backend and Driver are set by Start.
	Backend *backend.Backend
	Driver  *driver.Driver
	// Slices are the ResourceSlices the plugin published, complete (every
	// slice of the pool), SlicesAfter how long after Start began.
	Slices      []*resourceapi.ResourceSlice
	SlicesAfter time.Duration

	conn    *grpc.ClientConn
	kubelet drapb.DRAPluginClient
}

// New creates the node's directories under a new temporary directory.
func New(cfg Config) (*Node, error) {
	// Unix socket paths are limited to 108 bytes; keep the root short.
	root, err := os.MkdirTemp("", "gpudra-"+cfg.NodeName+"-")
	if err != nil {
		return nil, err
	}
	return &Node{Config: cfg, Root: root, Client: fakeapi.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: cfg.NodeName}})}, nil
}

// Dir is the node's directory called name.
func (n *Node) Dir(name string) string { return filepath.Join(n.Root, name) }

// StateDir is the plugin's --state-dir; CDIDir where it writes CDI specs.
func (n *Node) StateDir() string { return n.Dir("state") }
func (n *Node) CDIDir() string   { return n.Dir("cdi") }

// Start starts the plugin on be, waits until its ResourceSlices are in the
// API (they are before driver.Start returns) and connects to its DRA
// socket.
func (n *Node) Start(ctx context.Context, be *backend.Backend) error {
	n.Backend = be
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
	d, err := driver.Start(ctx, driver.Config{DriverName: n.DriverName, NodeName: n.NodeName, Client: n.Client, Backend: be,
		StateDir: n.StateDir(), CDIDir: n.CDIDir(), PluginDir: n.Dir("plugin"), RegistrarDir: n.Dir("registry"), Publish: n.Publish})
	if err != nil {
		return err
	}
	n.Driver = d
	pub := <-watched
	if pub.err != nil {
		return pub.err
	}
	n.Slices, n.SlicesAfter = pub.slices, pub.after
	n.conn, err = grpc.NewClient("unix://"+d.DRASocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	n.kubelet = drapb.NewDRAPluginClient(n.conn)
	return nil
}

// Close stops the plugin, if started, and removes the node's directories.
func (n *Node) Close() {
	if n.conn != nil {
		_ = n.conn.Close()
		n.conn = nil
	}
	if n.Driver != nil {
		n.Driver.Stop()
		n.Driver = nil
	}
	_ = os.RemoveAll(n.Root)
}

// Prepare puts the allocated claim into the API and prepares it over the
// DRA socket. A per-claim error is returned as is (the plugin's message).
func (n *Node) Prepare(ctx context.Context, claim *resourceapi.ResourceClaim) (*drapb.NodePrepareResourceResponse, error) {
	if n.kubelet == nil {
		return nil, errors.New("node not started")
	}
	if _, err := n.Client.ResourceV1().ResourceClaims(claim.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	req := kubeletClaim(claim)
	resp, err := n.kubelet.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{req}})
	if err != nil {
		return nil, err
	}
	r := resp.Claims[req.Uid]
	if r == nil {
		return nil, fmt.Errorf("no answer for claim %s", req.Uid)
	}
	if r.Error != "" {
		return nil, errors.New(r.Error)
	}
	return r, nil
}

// Unprepare unprepares the claims in one call over the DRA socket and
// returns the call's error or the claims' errors.
func (n *Node) Unprepare(ctx context.Context, claims ...*resourceapi.ResourceClaim) error {
	if n.kubelet == nil {
		return errors.New("node not started")
	}
	reqs := make([]*drapb.Claim, 0, len(claims))
	for _, c := range claims {
		reqs = append(reqs, kubeletClaim(c))
	}
	resp, err := n.kubelet.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: reqs})
	if err != nil {
		return err
	}
	var errs []error
	for _, r := range reqs {
		if msg := resp.Claims[r.Uid].GetError(); msg != "" {
			errs = append(errs, fmt.Errorf("unprepare %s: %s", r.Name, msg))
		}
	}
	return errors.Join(errs...)
}

func kubeletClaim(c *resourceapi.ResourceClaim) *drapb.Claim {
	return &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
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
