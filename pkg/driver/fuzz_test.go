// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzRecover starts the plugin on a checkpoint record the fuzzer writes
// (wrapped with a valid checksum, so that the record's contents, not the
// envelope, are explored). Start must succeed, and nothing outside the
// plugin's own directories may be touched, whatever the record names.
func FuzzRecover(f *testing.F) {
	for _, rec := range []string{
		`{"uid":"uid-f","namespace":"default","name":"f","state":"PrepareCompleted","devices":[{"pool":"n1","device":"gpu-1","type":"gpu","uuid":"GPU-1","cdiDeviceIDs":["k8s.gpu.nvidia.com/claim=uid-f-gpu-1"]}]}`,
		`{"uid":"uid-f","namespace":"default","name":"f","state":"PrepareStarted","devices":[{"pool":"n1","device":"gpu-1","type":"gpu","uuid":"GPU-1","sharing":{"strategy":"MPS","target":"../../victim"}}]}`,
		`{"uid":"uid-f","namespace":"default","name":"f","state":"PrepareStarted","devices":[{"pool":"n1","device":"gpu-1","type":"gpu","sharing":{"strategy":"MPS","target":""}}]}`,
		`{"uid":"uid-f","namespace":"default","name":"f","state":"PrepareCompleted","devices":[{"pool":"n1","device":"gpu-0-mig-1g10gb-19-0","type":"mig","uuid":"MIG-1","mig":{"parentUUID":"GPU-0","profile":"1g.10gb","start":0,"size":1,"dynamic":true,"giID":3,"ciID":0}}]}`,
		`{"uid":"uid-f","namespace":"default","name":"f","state":"PrepareStarted","devices":[{"pool":"n1","device":"gpu-9","type":"gpu","uuid":"GPU-9","sharing":{"strategy":"TimeSlicing","target":"GPU-9","interval":"Long"}}]}`,
		`{"uid":"uid-f","state":"PrepareCompleted","devices":[{"device":"gpu-1"},{"device":"gpu-1"}]}`,
	} {
		f.Add([]byte(rec))
	}
	f.Fuzz(func(t *testing.T, record []byte) {
		root, err := os.MkdirTemp("", "gfuzz")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(root)
		victim := filepath.Join(root, "victim", "data")
		if err := os.MkdirAll(victim, 0o755); err != nil {
			t.Fatal(err)
		}
		ckpt := filepath.Join(root, "state", "checkpoint")
		if err := os.MkdirAll(ckpt, 0o755); err != nil {
			t.Fatal(err)
		}
		var claim any = json.RawMessage(record)
		if !json.Valid(record) {
			claim = string(record)
		}
		putRecord(t, ckpt, "uid-f.json", claim)
		n := newNodeAt(t, root, "h100x2", true) // fails the test if Start fails
		n.stop()
		if _, err := os.Stat(victim); err != nil {
			t.Fatalf("recovery touched a directory outside its own: %v", err)
		}
		entries, _ := os.ReadDir(root)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		for _, name := range names {
			if !slices.Contains([]string{"state", "cdi", "plugin", "registry", "victim"}, name) {
				t.Fatalf("recovery created %s outside its directories", name)
			}
		}
	})
}
