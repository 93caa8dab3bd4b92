// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Command recorder stands in for nvidia-smi and nvidia-cuda-mps-control in
// a fake driver root. It is built static, so that it runs chrooted into a
// root that holds nothing else, and appends what it was called with (argv,
// environment, working directory, the root it sees, stdin) to /records.jsonl
// inside that root. As `nvidia-cuda-mps-control -f` it creates the control
// pipe and runs until a `quit` arrives; as nvidia-smi it fails when the root
// holds /fail-nvidia-smi.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type record struct {
	Tool  string   `json:"tool"`
	Args  []string `json:"args"`
	Env   []string `json:"env"`
	Cwd   string   `json:"cwd"`
	Root  string   `json:"root"` // the content of /fake-driver-root
	Stdin string   `json:"stdin,omitempty"`
}

func main() {
	tool := filepath.Base(os.Args[0])
	cwd, _ := os.Getwd()
	marker, _ := os.ReadFile("/fake-driver-root")
	r := record{Tool: tool, Args: os.Args[1:], Env: os.Environ(), Cwd: cwd, Root: strings.TrimSpace(string(marker))}
	daemon := tool == "nvidia-cuda-mps-control" && len(os.Args) > 1 && os.Args[1] == "-f"
	if tool == "nvidia-cuda-mps-control" && !daemon {
		in, _ := io.ReadAll(os.Stdin)
		r.Stdin = string(in)
	}
	write(r)
	pipe := os.Getenv("CUDA_MPS_PIPE_DIRECTORY")
	switch {
	case tool == "nvidia-smi":
		if _, err := os.Stat("/fail-nvidia-smi"); err == nil {
			fmt.Println("Unable to set the compute policy: Insufficient Permissions")
			os.Exit(4)
		}
	case daemon:
		if err := os.WriteFile(filepath.Join(pipe, "control"), nil, 0o600); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		for {
			if _, err := os.Stat(filepath.Join(pipe, "quit")); err == nil {
				os.Remove(filepath.Join(pipe, "control"))
				return
			}
			if _, err := os.Stat("/crash-mps-control"); err == nil {
				os.Exit(2)
			}
			time.Sleep(10 * time.Millisecond)
		}
	case strings.TrimSpace(r.Stdin) == "quit":
		if err := os.WriteFile(filepath.Join(pipe, "quit"), nil, 0o600); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
}

func write(r record) {
	data, _ := json.Marshal(r)
	f, err := os.OpenFile("/records.jsonl", os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer f.Close()
	_, _ = f.Write(append(data, '\n'))
}
