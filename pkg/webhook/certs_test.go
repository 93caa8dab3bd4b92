// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a self-signed certificate for cn and its key.
func writePair(t *testing.T, dir, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func servedCN(t *testing.T, l *CertLoader) string {
	t.Helper()
	c, err := l.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.Subject.CommonName
}

func TestCertLoaderPicksUpRenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "first")
	l, err := NewCertLoader(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err != nil {
		t.Fatal(err)
	}
	if cn := servedCN(t, l); cn != "first" {
		t.Fatalf("serves %q, want first", cn)
	}
	writePair(t, dir, "renewed")
	// Newer mtime even on file systems with coarse timestamps.
	later := time.Now().Add(time.Minute)
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.Chtimes(filepath.Join(dir, f), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if cn := servedCN(t, l); cn != "first" {
		t.Fatalf("reloaded before the recheck interval: %q", cn)
	}
	l.mu.Lock()
	l.checked = time.Time{}
	l.mu.Unlock()
	if cn := servedCN(t, l); cn != "renewed" {
		t.Fatalf("serves %q after renewal, want renewed", cn)
	}
	// A broken file (caught mid-write) keeps the pair in use.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.mu.Lock()
	l.checked = time.Time{}
	l.mu.Unlock()
	if cn := servedCN(t, l); cn != "renewed" {
		t.Fatalf("serves %q after a broken write, want renewed", cn)
	}
}

func TestCertLoaderNamesMissingFile(t *testing.T) {
	_, err := NewCertLoader("/nonexistent/tls.crt", "/nonexistent/tls.key")
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/tls.crt") {
		t.Fatalf("got %v, want an error naming the file", err)
	}
}
