// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package prepare

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	configapi "github.com/gpu-dra-driver/gpu-dra-driver/api/resource/v1beta1"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/webhook"
)

// TestWebhookAgreesWithPrepare feeds every config of the decoder's fuzz
// corpus, on a GPU request and on a MIG request, to the admission webhook
// and to prepare's config resolution: a claim the webhook admits must
// resolve at prepare, and one it denies must fail there too.
func TestWebhookAgreesWithPrepare(t *testing.T) {
	seeds, err := filepath.Glob(filepath.Join("..", "..", "api", "resource", "v1beta1", "testdata", "fuzz", "FuzzDecodeConfig", "*"))
	if err != nil || len(seeds) == 0 {
		t.Fatalf("no fuzz corpus: %v", err)
	}
	const driver = "gpu.nvidia.com"
	v := webhook.NewValidator(driver, nil)
	denied := 0
	for _, seed := range seeds {
		raw := readSeed(t, seed)
		for _, rt := range []struct {
			class string
			typ   configapi.DeviceKind
		}{{"gpu.nvidia.com", configapi.WholeGPU}, {"mig.nvidia.com", configapi.MIG}} {
			params := runtime.RawExtension{Raw: raw}
			spec := &resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "req", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: rt.class}}},
				Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
					Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driver, Parameters: params}}}},
			}}
			webhookErrs := v.ValidateSpec("spec", spec)

			configs, prepErr := decodeConfigs(driver, []resourceapi.DeviceAllocationConfiguration{{
				Source:              resourceapi.AllocationConfigSourceClaim,
				DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: driver, Parameters: params}},
			}})
			if prepErr == nil {
				_, prepErr = configFor(configs, "req", rt.typ)
			}
			if (len(webhookErrs) > 0) != (prepErr != nil) {
				t.Errorf("%s on %s: webhook says %v, prepare says %v", filepath.Base(seed), rt.class, webhookErrs, prepErr)
			}
			if prepErr != nil {
				denied++
			}
		}
	}
	if denied == 0 || denied == 2*len(seeds) {
		t.Fatalf("%d of %d cases denied: the corpus no longer has both valid and invalid configs", denied, 2*len(seeds))
	}
}

// readSeed returns the []byte value of a `go test fuzz v1` corpus file.
func readSeed(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], "[]byte(") {
		t.Fatalf("%s: not a one-value []byte corpus file", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}
