// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package opcmd holds the operator's commands, usage, capacity and
// diagnose, for the two binaries that offer them: cmd/kubectl-gpu, the
// kubectl plugin `kubectl gpu`, which links nothing of the node side, and
// cmd/gpudra, the development binary, which adds the harnesses (demo,
// smoke, ...). The commands take kubectl's own flags (--kubeconfig,
// --context, -n, ...) through k8s.io/cli-runtime's ConfigFlags, and print
// -o json and -o yaml through its printers.
package opcmd

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// ExitCode makes the binary exit with a status of the command's choosing
// (diagnose: 0 fine, 1 cause found, 2 could not tell) without printing.
type ExitCode int

func (e ExitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Commands are usage, capacity and diagnose; prog is how their help
// names the binary (DisplayName).
func Commands(prog string) []*cobra.Command {
	return []*cobra.Command{NewUsageCommand(prog), NewCapacityCommand(prog), NewDiagnoseCommand(prog)}
}

// NewRoot is a binary's root command, called prog in help.
func NewRoot(prog, short string) *cobra.Command {
	return &cobra.Command{Use: prog, Short: short, SilenceUsage: true, SilenceErrors: true,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: prog}}
}

// Execute runs root and returns the binary's exit status, printing the
// error unless it is an ExitCode.
func Execute(root *cobra.Command, stderr io.Writer) int {
	err := root.Execute()
	if err == nil {
		return 0
	}
	var code ExitCode
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintln(stderr, "Error:", err)
	return 1
}

// DisplayName is how help calls the binary: kubectl runs a plugin named
// kubectl-gpu for `kubectl gpu`, so under that name the usage lines say
// "kubectl gpu usage" (kubectl's plugin name rules: dashes separate words).
// Any other name is kept, so gpudra stays gpudra.
func DisplayName(argv0 string) string {
	base := strings.TrimSuffix(filepath.Base(argv0), ".exe")
	if rest, ok := strings.CutPrefix(base, "kubectl-"); ok {
		return "kubectl " + strings.ReplaceAll(rest, "-", " ")
	}
	return base
}
