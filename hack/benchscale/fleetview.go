// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"
)

// fleetCommands are the fleet-wide gpudra commands timed on each fleet
// (issue 31: at 500 nodes in at most 5 s and 1 GiB).
var fleetCommands = [][]string{
	{"usage"},
	{"capacity", "--mig-profile", "1g.10gb"},
}

// timeFleetCommands runs each of fleetCommands three times as a user would
// and logs the middle run's wall time and peak RSS, and its last line.
func timeFleetCommands(ctx context.Context, gpudra, kubeconfig string, nodes int) error {
	for _, args := range fleetCommands {
		var walls, rss []float64
		var last string
		for range diagnoseRuns {
			var out bytes.Buffer
			cmd := exec.CommandContext(ctx, gpudra, append(args, "--kubeconfig="+kubeconfig)...)
			cmd.Stdout, cmd.Stderr = &out, &out
			t := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("gpudra %s: %w\n%s", strings.Join(args, " "), err, out.String())
			}
			walls = append(walls, time.Since(t).Seconds())
			rss = append(rss, float64(cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)/1024)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			last = lines[len(lines)-1]
		}
		sort.Float64s(walls)
		sort.Float64s(rss)
		logf("%d nodes: gpudra %s: wall p50 %.2f s, max RSS p50 %.0f MiB; %s", nodes, strings.Join(args, " "), walls[1], rss[1], last)
	}
	return nil
}
