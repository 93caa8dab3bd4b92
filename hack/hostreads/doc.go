// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package hostreads holds the check that `make lint` runs (issue 47): the
// node plugin reads host files it does not own alone (the CDI directory,
// the kubelet plugin directory, procfs, sysfs) only through pkg/capfile,
// which reads regular files only, never opens for a blocking read and caps
// the size, so that a FIFO or a huge file there cannot hang or exhaust
// start. Its test fails on an os.ReadFile, os.Open or os.OpenFile (or
// ioutil.ReadFile) in the non-test code of pkg/driver, pkg/prepare,
// pkg/ledger and pkg/cdi that its allow-list does not name with a reason.
package hostreads
