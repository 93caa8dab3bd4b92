// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhookcmd

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The flags reach run: with the explainer on and no Lease namespace it
// refuses to start; off, it gets as far as the serving certificate.
func TestExplainFlags(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert-file=/nonexistent/tls.crt"}, "--leader-election-namespace"},
		{[]string{"--tls-cert-file=/nonexistent/tls.crt", "--explain-pending=false"}, "--tls-cert-file"},
		{[]string{"--tls-cert-file=/nonexistent/tls.crt", "--leader-election-namespace=ns", "--leader-election-identity="}, "--leader-election-identity"},
	} {
		cmd := newCommand()
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one about %s", tc.args, err, tc.want)
		}
	}
}

// Off, the explainer touches nothing: no Lease, no watches.
func TestExplainerOff(t *testing.T) {
	client := fake.NewClientset()
	runExplainer(context.Background(), client, "gpu.nvidia.com", explainOptions{enabled: false, leaseNamespace: "ns", leaseName: "l", identity: "a"})
	if a := client.Actions(); len(a) != 0 {
		t.Errorf("API calls with the explainer off: %v", a)
	}
}

// On, the replica takes the Lease, then starts the explainer's informers;
// when it stops it gives the Lease up for the next replica.
func TestExplainerLeads(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		runExplainer(ctx, client, "gpu.nvidia.com", explainOptions{enabled: true, leaseNamespace: "ns", leaseName: "explainer", identity: "replica-a"})
	}()
	watchesPods := func() bool {
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == "pods" {
				if w, ok := a.(k8stesting.WatchActionImpl); ok && w.WatchRestrictions.Fields.String() != "spec.nodeName=" {
					t.Errorf("pods watched with field selector %q, want spec.nodeName=", w.WatchRestrictions.Fields)
				}
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(10 * time.Second); !watchesPods(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the explainer did not start; API calls: %v", client.Actions())
		}
	}
	lease, err := client.CoordinationV1().Leases("ns").Get(ctx, "explainer", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "replica-a" {
		t.Fatalf("Lease %+v (%v), want held by replica-a", lease, err)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runExplainer did not return after its context ended")
	}
	lease, err = client.CoordinationV1().Leases("ns").Get(context.Background(), "explainer", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("Lease %+v (%v), want released", lease.Spec, err)
	}
}
