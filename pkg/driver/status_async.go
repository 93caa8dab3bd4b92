// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"cmp"
	"context"
	"strings"

	"google.golang.org/grpc"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/devicestatus"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/ledger"
)

// startStatus starts the device-status writer and returns the helper
// option that tells it when the kubelet's calls are in flight: a status
// write then waits until they are over (devicestatus.Gate), so that it is
// sent after the reply and never beside the kubelet's next call or the
// container start that follows a prepare. The interceptor wraps the whole
// gRPC call, the helper's claim GET and device metadata included.
//
// What the guarantees rest on: the status is queued before the reply
// (prepare.State.Prepare), written once the calls are over or at the
// latest devicestatus.DefaultMaxDefer later, retried while the claim is
// prepared, and written again at every start for each kept claim
// (RemoveStale), so a restart before the write loses nothing.
func (d *Driver) startStatus(ctx context.Context, book *ledger.Ledger) kubeletplugin.Option {
	gate := devicestatus.NewGate()
	d.status = devicestatus.New(ctx, cmp.Or(d.cfg.StatusClient, d.cfg.Client), d.cfg.DriverName, devicestatus.Options{
		Records: book, Health: d.deviceCondition, Gate: gate,
	})
	return kubeletplugin.GRPCInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if kubeletCall(info.FullMethod, req) {
			defer gate.Enter()()
		}
		return handler(ctx, req)
	})
}

// kubeletCall reports whether a gRPC call is one of the kubelet's prepare
// or unprepare calls with claims (of either API version the helper
// serves). The liveness probe's empty prepare calls, registration and
// health streams do not hold status writes back.
func kubeletCall(method string, req any) bool {
	switch {
	case strings.HasSuffix(method, "/NodeUnprepareResources"):
		return true
	case !strings.HasSuffix(method, "/NodePrepareResources"):
		return false
	}
	switch r := req.(type) {
	case *drapb.NodePrepareResourcesRequest:
		return len(r.GetClaims()) > 0
	case *drapbv1beta1.NodePrepareResourcesRequest:
		return len(r.GetClaims()) > 0
	}
	return true
}
