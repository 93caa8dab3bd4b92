// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package ocirun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A CDI spec with one device: a node (the host's /dev/null under another
// name, so that no root is needed), a mount, a hook and an env variable.
const specYAML = `cdiVersion: 0.6.0
kind: example.com/gpu
devices:
- name: gpu0
  containerEdits:
    deviceNodes:
    - path: /dev/example0
      hostPath: /dev/null
    mounts:
    - hostPath: /tmp
      containerPath: /driver/lib
      options: [ro, nosuid, nodev, bind]
    hooks:
    - hookName: createContainer
      path: /usr/bin/true
      args: [true, update-ldcache]
    env: [EXAMPLE_VISIBLE=gpu0]
`

func TestSpecAppliesTheCDIDevice(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "example.yaml"), []byte(specYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Container{CDIDirs: []string{dir}, Devices: []string{"example.com/gpu=gpu0"}, Args: []string{"/bin/probe"}}
	spec, err := c.Spec("/rootfs")
	if err != nil {
		t.Fatal(err)
	}
	if spec.Root.Path != "/rootfs" || spec.Process.Args[0] != "/bin/probe" {
		t.Errorf("root %q args %v", spec.Root.Path, spec.Process.Args)
	}
	if len(spec.Linux.Devices) != 1 || spec.Linux.Devices[0].Path != "/dev/example0" || spec.Linux.Devices[0].Major != 1 || spec.Linux.Devices[0].Minor != 3 {
		t.Errorf("devices %+v, want /dev/example0 1:3", spec.Linux.Devices)
	}
	// Deny all first, then the device's node allowed: a container sees
	// no other device.
	rules := spec.Linux.Resources.Devices
	if len(rules) != 2 || rules[0].Allow || !rules[1].Allow || *rules[1].Major != 1 || *rules[1].Minor != 3 {
		t.Errorf("device cgroup rules %+v", rules)
	}
	found := false
	for _, m := range spec.Mounts {
		found = found || (m.Destination == "/driver/lib" && m.Source == "/tmp")
	}
	if !found {
		t.Errorf("mounts %+v lack /driver/lib", spec.Mounts)
	}
	if spec.Hooks == nil || len(spec.Hooks.CreateContainer) != 1 || spec.Hooks.CreateContainer[0].Args[1] != "update-ldcache" {
		t.Errorf("hooks %+v", spec.Hooks)
	}
	if !strings.Contains(strings.Join(spec.Process.Env, " "), "EXAMPLE_VISIBLE=gpu0") {
		t.Errorf("env %v", spec.Process.Env)
	}
}

func TestSpecRefusesAnUnknownDevice(t *testing.T) {
	c := Container{CDIDirs: []string{t.TempDir()}, Devices: []string{"example.com/gpu=gpu9"}, Args: []string{"/bin/probe"}}
	if _, err := c.Spec("/rootfs"); err == nil || !strings.Contains(err.Error(), "example.com/gpu=gpu9") {
		t.Errorf("error %v, want one naming the unresolved device", err)
	}
	if _, err := (Container{}).Spec("/rootfs"); err == nil || !strings.Contains(err.Error(), "Args") {
		t.Errorf("error %v, want one naming Args", err)
	}
}
