// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// CertLoader serves the certificate in a pair of PEM files and loads it
// again when the files change: cert-manager renews the Secret, the kubelet
// updates the mounted files, and the webhook must not need a restart.
type CertLoader struct {
	certFile, keyFile string
	// recheck is how often the files are looked at, at most.
	recheck time.Duration

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   string
	checked time.Time
}

// NewCertLoader loads the pair once, so that a missing or bad file is an
// error at start-up rather than a failed handshake later.
func NewCertLoader(certFile, keyFile string) (*CertLoader, error) {
	l := &CertLoader{certFile: certFile, keyFile: keyFile, recheck: 10 * time.Second}
	if err := l.reload(time.Now()); err != nil {
		return nil, err
	}
	return l, nil
}

// GetCertificate is a tls.Config.GetCertificate.
func (l *CertLoader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.checked) >= l.recheck {
		// A pair caught half-written fails to load; the one in use stays.
		_ = l.reloadLocked(now)
	}
	return l.cert, nil
}

func (l *CertLoader) reload(now time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reloadLocked(now)
}

func (l *CertLoader) reloadLocked(now time.Time) error {
	l.checked = now
	stamp, err := fileStamp(l.certFile, l.keyFile)
	if err != nil {
		return err
	}
	if stamp == l.stamp && l.cert != nil {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(l.certFile, l.keyFile)
	if err != nil {
		return fmt.Errorf("load serving certificate: %w", err)
	}
	l.cert, l.stamp = &cert, stamp
	return nil
}

// fileStamp identifies the files' current content by size and mtime. stat
// follows the symlinks a Secret volume swaps on update.
func fileStamp(files ...string) (string, error) {
	s := ""
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("serving certificate: %w", err)
		}
		s += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}
