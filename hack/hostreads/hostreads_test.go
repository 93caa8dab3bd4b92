// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

package hostreads

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// checked are the package trees whose reads are checked, from the
// repository root.
var checked = []string{"pkg/driver", "pkg/prepare", "pkg/ledger", "pkg/cdi"}

// allowed are the direct reads that need no pkg/capfile, as
// "<file> <function>", each with the reason. A new one is added here with
// its reason, in review; an entry that matches nothing fails the check
// too, so the list never outlives the code.
var allowed = map[string]string{
	"pkg/cdi/hook.go VerifyHook": "opens the installed hook O_NOFOLLOW|O_NONBLOCK and checks it is a regular file of this user before hashing it (several MB)",
}

// reads are the calls the check looks for, by package path and function.
var reads = map[string][]string{
	"os":        {"ReadFile", "Open", "OpenFile"},
	"io/ioutil": {"ReadFile"},
}

// found is one direct read: where, and in which function.
type found struct {
	file, fn, call string
	line           int
}

func (f found) key() string { return f.file + " " + f.fn }

// directReads lists the direct reads of one parsed file.
func directReads(fset *token.FileSet, file *ast.File, name string) []found {
	local := map[string]string{} // local name -> import path
	for _, imp := range file.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := reads[path]; !ok {
			continue
		}
		n := filepath.Base(path)
		if imp.Name != nil {
			n = imp.Name.Name
		}
		local[n] = path
	}
	var out []found
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			path, ok := local[pkg.Name]
			if !ok {
				return true
			}
			for _, f := range reads[path] {
				if sel.Sel.Name == f {
					out = append(out, found{file: name, fn: fn.Name.Name, call: pkg.Name + "." + f, line: fset.Position(sel.Pos()).Line})
				}
			}
			return true
		})
	}
	return out
}

func TestHostReadsGoThroughCapfile(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	var all []found
	for _, dir := range checked {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			all = append(all, directReads(fset, file, filepath.ToSlash(rel))...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	used := map[string]bool{}
	var bad []string
	for _, f := range all {
		if _, ok := allowed[f.key()]; ok {
			used[f.key()] = true
			continue
		}
		bad = append(bad, f.file+":"+strconv.Itoa(f.line)+": "+f.call+" in "+f.fn)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: read host files through pkg/capfile (capfile.Read: regular files only, no blocking open, a size cap), or add \"<file> <function>\" with the reason to the allow-list in hack/hostreads", b)
	}
	for k := range allowed {
		if !used[k] {
			t.Errorf("allow-list entry %q matches no direct read any more: remove it", k)
		}
	}
}

// The check finds direct reads however os is imported, and only those.
func TestDirectReadsFound(t *testing.T) {
	const src = `package x
import (
	xos "os"
	"io/ioutil"
	"github.com/gpu-dra-driver/gpu-dra-driver/pkg/capfile"
)
func a() { _, _ = xos.ReadFile("p") }
func b() { f, _ := xos.OpenFile("p", 0, 0); _ = f; _, _ = ioutil.ReadFile("q") }
func c() { _, _ = capfile.Read("p", 1); _ = xos.Getenv("X") }
`
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range directReads(fset, file, "x.go") {
		got = append(got, f.fn+":"+f.call)
	}
	want := []string{"a:xos.ReadFile", "b:xos.OpenFile", "b:ioutil.ReadFile"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("found %v, want %v", got, want)
	}
}
