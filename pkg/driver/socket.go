// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
)

// SocketMode is the mode of the plugin's two sockets (the DRA service in
// the plugin data directory, the registration socket in the kubelet's
// plugins_registry). Connecting to a unix socket needs write permission on
// it, so only the owner (root, like the kubelet) can; net.Listen would
// leave 0777 less the umask, which lets anyone on the node who can reach
// the directory call NodePrepareResources.
const SocketMode os.FileMode = 0o750

// PluginDirMode is the mode of the plugin data directory, which holds the
// DRA socket, the checkpoint and the simulator's files. The kubelet creates
// a hostPath DirectoryOrCreate volume 0755; nobody but root needs to look
// inside (containerd bind-mounts what CDI specs name as root).
const PluginDirMode os.FileMode = 0o750

// listenUnix is the kubelet plugin helper's default listener (remove a
// stale socket, listen) plus SocketMode. The socket is open to others only
// between bind and chmod, inside directories that are 0750 themselves.
func listenUnix(ctx context.Context, path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket: %w", err)
	}
	var lc net.ListenConfig
	l, err := lc.Listen(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	// A *net.UnixListener from Listen removes its socket file on Close.
	if err := os.Chmod(path, SocketMode); err != nil {
		_ = l.Close() // the chmod error is the one to report
		return nil, fmt.Errorf("restrict socket %s: %w", path, err)
	}
	return l, nil
}
