// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package plugincmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/resourceslices"
)

// sharesOptions are --consumable-shares and its companions: NVIDIA's
// reference driver's flag of that name (kubernetes-sigs/dra-driver-nvidia-gpu
// 95932046, cmd/gpu-kubelet-plugin/main.go), whose values are accepted as
// it spells them, so that a node switched from it keeps its setting.
type sharesOptions struct {
	mode  string
	count int
	gpus  []int
	// parsed is what complete made of the three.
	parsed resourceslices.ConsumableShares
}

func (s *sharesOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.mode, "consumable-shares", "none", "Offer GPUs of the GPU class itself for shares many claims hold at once, as NVIDIA's driver's flag of this name: none; memory (claims request capacity memory, each share runs under MPS limited to it); integer (a \"shares\" capacity of --consumable-shares-count per GPU, 1 per claim by default; time-sliced); unlimited (claims need request nothing; time-sliced). NVIDIA's spellings work too: disabled, or a share count for integer (chart value sharing.consumableShares.mode).")
	f.IntVar(&s.count, "consumable-shares-count", resourceslices.DefaultShareCount, "Shares per GPU with --consumable-shares=integer (chart value sharing.consumableShares.shares).")
	f.IntSliceVar(&s.gpus, "consumable-shares-gpus", nil, "Limit --consumable-shares to these GPU minor numbers; all GPUs when empty (chart value sharing.consumableShares.gpus).")
}

// complete checks the flags against each other and against memory
// fractions, which cannot offer the same GPU.
func (s *sharesOptions) complete(fractional bool, fractionalOn []int) error {
	mode, count, err := resourceslices.ParseShareMode(s.mode)
	if err != nil {
		return err
	}
	if count == 0 {
		count = s.count
	} else if s.count != resourceslices.DefaultShareCount && s.count != count {
		return fmt.Errorf("--consumable-shares=%d and --consumable-shares-count=%d disagree; give the count once", count, s.count)
	}
	if count < 1 {
		return fmt.Errorf("--consumable-shares-count: %d; a GPU needs at least 1 share", count)
	}
	s.parsed = resourceslices.ConsumableShares{Mode: mode, GPUs: s.gpus, Count: count}
	if s.parsed.Overlaps(fractional, fractionalOn) {
		return fmt.Errorf("--consumable-shares=%s and --fractional-memory both offer the same GPUs (%s and %s); a GPU is offered one way: give each its GPUs with --consumable-shares-gpus and --fractional-memory-gpus (chart values sharing.consumableShares.gpus and sharing.fractionalMemoryGPUs)",
			mode, minorsOrAll(s.gpus), minorsOrAll(fractionalOn))
	}
	return nil
}

func minorsOrAll(m []int) string {
	if len(m) == 0 {
		return "all"
	}
	return fmt.Sprint(m)
}
