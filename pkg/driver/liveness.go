// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// livenessTimeout bounds the probe's own gRPC call; the kubelet's probe
// has its own timeout on top (the chart sets it).
const livenessTimeout = 3 * time.Second

// Live reports whether the kubelet can still use this plugin. A restart of
// the container fixes each failure it reports, and nothing else does:
//   - the kubelet answered our registration with an error;
//   - our registration socket is gone from the kubelet's plugin registry
//     (the kubelet deregisters a plugin whose socket disappears, and it
//     only registers sockets it sees being created);
//   - the DRA socket is gone or its gRPC server does not answer.
//
// A registration the kubelet has not confirmed yet is not a failure: the
// kubelet may still be starting.
func (d *Driver) Live() error {
	if d.helper == nil {
		return errors.New("kubelet plugin not started")
	}
	if st := d.helper.RegistrationStatus(); st != nil && !st.PluginRegistered {
		return fmt.Errorf("the kubelet refused the plugin's registration: %s", st.Error)
	}
	if err := d.registrationSocketPresent(); err != nil {
		return err
	}
	return d.draSocketAnswers()
}

// Ready reports whether the plugin serves everything it publishes: it is
// live (prepared claims were restored before it served the kubelet), its
// slices are published, and its health monitor sees GPU faults as they
// happen. A fault in
// the moments before the monitor registers its NVML event set would be
// lost (NVML does not replay events), so a pod that turns Ready (and lets
// a rolling update go on) has the health watch in place.
func (d *Driver) Ready() error {
	if err := d.Live(); err != nil {
		return err
	}
	if d.health == nil || !d.health.Ready() {
		return errors.New("the GPU health monitor is not watching NVML events yet")
	}
	if !d.published.Load() {
		return errors.New("the ResourceSlices are not published yet: the API server has not answered")
	}
	return d.ref.Load().NotReady()
}

// registrationSocketPresent looks for the helper's registration socket. Its
// name depends on whether rolling updates are on (the helper derives it
// from the pod UID), so any socket of this driver in the registry counts.
func (d *Driver) registrationSocketPresent() error {
	entries, err := os.ReadDir(d.cfg.RegistrarDir)
	if err != nil {
		return fmt.Errorf("read the kubelet's plugin registry: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.Type()&os.ModeSocket == 0 || !strings.HasSuffix(name, "-reg.sock") {
			continue
		}
		if strings.HasPrefix(name, d.cfg.DriverName+"-") || strings.HasPrefix(name, "dra-") {
			return nil
		}
	}
	return fmt.Errorf("no registration socket of %s in %s: the kubelet no longer knows this plugin", d.cfg.DriverName, d.cfg.RegistrarDir)
}

// DRASocket is the path of the socket the kubelet calls, as the kubelet
// plugin helper chose it: dra.sock, or dra-<pod UID>.sock with rolling
// updates on. "" before the helper listens.
func (d *Driver) DRASocket() string {
	if p := d.draSocket.Load(); p != nil {
		return *p
	}
	return ""
}

// draSocketAnswers makes the cheapest real DRA call: a prepare of no claims.
// It goes through the helper's gRPC server like the kubelet's calls do,
// but touches no device and no API object.
func (d *Driver) draSocketAnswers() error {
	sock := d.DRASocket()
	if sock == "" {
		return errors.New("DRA socket: the kubelet plugin helper has not listened yet")
	}
	if _, err := os.Stat(sock); err != nil {
		return fmt.Errorf("DRA socket: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("DRA socket: %w", err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), livenessTimeout)
	defer cancel()
	if _, err := drapb.NewDRAPluginClient(conn).NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{}); err != nil {
		return fmt.Errorf("DRA socket %s does not answer: %w", sock, err)
	}
	return nil
}
