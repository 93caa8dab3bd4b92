// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package release

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Platform is one OS and architecture kubectl-gpu is shipped for.
type Platform struct{ OS, Arch string }

// Platforms are kubectl-gpu's: kubectl runs on operators' laptops as well
// as on Linux hosts (make kubectl-gpu-dist builds the same six).
var Platforms = []Platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// Bin is the kubectl plugin's file name on p ("kubectl-gpu.exe" on Windows):
// kubectl finds `kubectl gpu` by it.
func (p Platform) Bin() string {
	if p.OS == "windows" {
		return "kubectl-gpu.exe"
	}
	return "kubectl-gpu"
}

// ArchiveName is p's archive of version: a zip for Windows (what its users
// open without extra tools), a tar.gz elsewhere.
func (p Platform) ArchiveName(version string) string {
	ext := ".tar.gz"
	if p.OS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("kubectl-gpu_%s_%s_%s%s", version, p.OS, p.Arch, ext)
}

// ArchiveFile is a file to put in an archive under Name.
type ArchiveFile struct {
	Name string // path inside the archive
	Src  string // file on disk
	Mode int64
}

// WriteArchive writes files to path as a tar.gz or a zip (by path's
// suffix), reproducibly: fixed order, owner and modification time
// (mtime, the release commit's), no gzip name or time. The same inputs
// give the same bytes, so SHA256SUMS and the krew manifest's sha256 are a
// function of the commit.
func WriteArchive(path string, files []ArchiveFile, mtime time.Time) (err error) {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b ArchiveFile) int { return strings.Compare(a.Name, b.Name) })
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	switch {
	case strings.HasSuffix(path, ".tar.gz"):
		return writeTarGz(out, files, mtime)
	case strings.HasSuffix(path, ".zip"):
		return writeZip(out, files, mtime)
	}
	return fmt.Errorf("archive %s: want a name ending in .tar.gz or .zip", path)
}

func writeTarGz(w io.Writer, files []ArchiveFile, mtime time.Time) error {
	gz := gzip.NewWriter(w) // no Name, ModTime zero: nothing varies
	tw := tar.NewWriter(gz)
	for _, f := range files {
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: f.Name, Mode: f.Mode, Size: int64(len(data)), ModTime: mtime.UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func writeZip(w io.Writer, files []ArchiveFile, mtime time.Time) error {
	zw := zip.NewWriter(w)
	for _, f := range files {
		data, err := os.ReadFile(f.Src)
		if err != nil {
			return err
		}
		hdr := &zip.FileHeader{Name: f.Name, Method: zip.Deflate, Modified: mtime.UTC()}
		hdr.SetMode(os.FileMode(f.Mode))
		fw, err := zw.CreateHeader(hdr)
		if err != nil {
			return err
		}
		if _, err := fw.Write(data); err != nil {
			return err
		}
	}
	return zw.Close()
}

// ArchiveNames lists the file names in a tar.gz or zip archive.
func ArchiveNames(path string) ([]string, error) {
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		return names, zr.Close()
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		names = append(names, hdr.Name)
	}
}

// SHA256File is the hex SHA-256 of a file's contents.
func SHA256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteSHA256Sums writes dir/SHA256SUMS for the named files of dir in
// sha256sum's format ("HASH  NAME", sorted by name), which
// `sha256sum -c SHA256SUMS` checks.
func WriteSHA256Sums(dir string, names []string) error {
	names = slices.Sorted(slices.Values(names))
	var b strings.Builder
	for _, n := range names {
		sum, err := SHA256File(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, n)
	}
	return os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// ReadSHA256Sums reads dir/SHA256SUMS as name -> hash.
func ReadSHA256Sums(dir string) (map[string]string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		return nil, err
	}
	sums := map[string]string{}
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			return nil, fmt.Errorf("SHA256SUMS:%d: %q: want \"<64 hex>  <name>\"", i+1, line)
		}
		sums[name] = sum
	}
	return sums, nil
}
