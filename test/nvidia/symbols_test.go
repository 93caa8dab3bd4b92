// Copyright 2026 The gpu-dra-driver Authors.
// SPDX-License-Identifier: Apache-2.0

// Package nvidia checks the plugin against the oldest NVIDIA userspace it
// supports: R535, as Debian 12 ships it, unpacked by hack/nvidia-userspace.sh
// (make test runs it and names the host-layout driver root in
// GDRA_NVIDIA_HOST_ROOT).
//
// go-nvml dlopens libnvidia-ml.so.1 and leaves every nvml* symbol of the
// binary unresolved until its first call (lazy binding): a call to an entry
// point the installed driver does not export ends the process with
// "symbol lookup error: undefined symbol". TestNVMLEntryPointsExistInR535
// lists every entry point the binaries can call and checks each against the
// dynamic symbol table of R535's real libnvidia-ml.so.
//
// Why not the binary's own symbol tables: go-nvml wraps the whole NVML API
// (428 C functions in v0.13.4-0), every wrapper is reached through its
// nvml.Interface and nvml.Device methods, and the linker keeps a method
// whenever any interface call of that name is reachable; the plugin keeps 417
// of the 428 Go wrappers and imports all 428 C symbols, 99 of which R535
// lacks. The binary alone cannot tell a call the plugin makes from one
// it never makes, so the test works from the source instead:
//
//  1. `go list -deps -export -compiled` of the binaries gives every package
//     linked in and its compiled (cgo-processed) files;
//  2. each package outside go-nvml that depends on go-nvml (the plugin's
//     own, go-nvlib, nvcdi, ...) is type-checked, and every reference to a
//     go-nvml function, method or function variable is an entry point; so is
//     a call through a non-go-nvml interface whose method has the name and
//     signature of a go-nvml interface method (an interface that mirrors
//     nvml.Device);
//  3. go-nvml itself is type-checked from its cgo output and walked from
//     each entry point down to the C functions (_Cfunc_nvml*) it calls, with
//     interface methods dispatched to go-nvml's implementations;
//  4. a symbol is safe even when R535 lacks it if it is only reached through
//     a versioned fallback (go-nvml's updateVersionedSymbols switches
//     nvmlDeviceGetCount to nvmlDeviceGetCount_v2 only after dlsym finds
//     it), or if the calling function checks for that very symbol first
//     (go-nvlib's hasSymbol, nvml's LookupSymbol);
//  5. every other symbol must be in R535's dynamic symbol table.
package nvidia

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const (
	nvmlPkg = "github.com/NVIDIA/go-nvml/pkg/nvml"
	// hostRootEnv names the host-layout driver root of hack/nvidia-userspace.sh.
	hostRootEnv = "GDRA_NVIDIA_HOST_ROOT"
	// cmdsEnv overrides the binaries checked (space-separated package patterns).
	cmdsEnv = "GDRA_NVML_CMDS"
	// buildTags are the Makefile's GO_TAGS.
	buildTags = "grpcnotrace"
)

// defaultCmds are the binaries that open the real NVML: the plugin, and
// gpudra (smoke prepare runs the plugin in-process on a GPU host).
var defaultCmds = []string{"./cmd/gpu-kubelet-plugin", "./cmd/gpudra"}

func TestNVMLEntryPointsExistInR535(t *testing.T) {
	root := os.Getenv(hostRootEnv)
	if root == "" {
		t.Skipf("%s is not set: run `make test`, which unpacks the pinned R535 userspace with hack/nvidia-userspace.sh and sets it", hostRootEnv)
	}
	libPath := filepath.Join(root, "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
	exported, real, err := libraryExports(libPath)
	if err != nil {
		t.Fatalf("%s=%s: %v (re-run hack/nvidia-userspace.sh)", hostRootEnv, root, err)
	}
	if !exported["nvmlInit_v2"] || len(exported) < 200 {
		t.Fatalf("%s exports %d nvml* symbols, no nvmlInit_v2: not an NVML library", real, len(exported))
	}

	cmds := defaultCmds
	if s := strings.Fields(os.Getenv(cmdsEnv)); len(s) > 0 {
		cmds = s
	}
	a, err := analyze(cmds)
	if err != nil {
		t.Fatal(err)
	}

	var missing, guardedMissing []string
	for sym := range a.unguarded {
		if !exported[sym] {
			missing = append(missing, sym)
		}
	}
	for sym := range a.guarded {
		if _, ok := a.unguarded[sym]; !ok && !exported[sym] {
			guardedMissing = append(guardedMissing, sym)
		}
	}
	sort.Strings(missing)
	sort.Strings(guardedMissing)

	t.Logf("library: %s (%d nvml* symbols exported)", real, len(exported))
	t.Logf("binaries: %s; %d packages outside go-nvml call it (%s)", strings.Join(cmds, " "), len(a.pkgs), strings.Join(a.pkgs, ", "))
	t.Logf("go-nvml wraps %d NVML C functions; %d entry points are referenced from %d call sites; they reach %d C functions unguarded and %d more only behind a symbol check",
		a.wrapped, len(a.entries), a.sites, len(a.unguarded), len(a.guardedOnly()))
	t.Logf("behind a symbol check, not in this library (safe): %s", orNone(guardedMissing))
	guardedOnly := a.guardedOnly()
	sort.Strings(guardedOnly)
	t.Logf("behind a symbol check: %s", orNone(guardedOnly))
	if testing.Verbose() {
		for _, sym := range sortedKeys(a.unguarded) {
			t.Logf("unguarded %s <- %s", sym, a.unguarded[sym][0])
		}
	}
	for _, sym := range missing {
		t.Errorf("%s is called without a symbol check but %s does not export it: with this driver the call ends the process with \"undefined symbol: %s\"; called from:\n\t%s",
			sym, filepath.Base(real), sym, strings.Join(a.unguarded[sym], "\n\t"))
	}
	if len(missing) == 0 {
		t.Logf("all %d unguarded NVML entry points exist in %s", len(a.unguarded), filepath.Base(real))
	}
}

// libraryExports returns the nvml* symbols path's dynamic symbol table defines.
func libraryExports(path string) (map[string]bool, string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return nil, "", err
	}
	f, err := elf.Open(real)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", real, err)
	}
	out := map[string]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC && strings.HasPrefix(s.Name, "nvml") {
			out[s.Name] = true
		}
	}
	return out, real, nil
}

type listedPkg struct {
	ImportPath      string
	Dir             string
	Export          string
	Standard        bool
	CompiledGoFiles []string
	Deps            []string
	Error           *struct{ Err string }
}

type analysis struct {
	wrapped   int                 // C functions go-nvml wraps
	pkgs      []string            // packages outside go-nvml that reference it
	sites     int                 // references to go-nvml from those packages
	entries   map[string]bool     // go-nvml objects referenced
	unguarded map[string][]string // C symbol -> call sites (at most 3)
	guarded   map[string]bool     // C symbols reached only behind a symbol check at some site
}

func (a *analysis) guardedOnly() []string {
	var out []string
	for s := range a.guarded {
		if _, ok := a.unguarded[s]; !ok {
			out = append(out, s)
		}
	}
	return out
}

func analyze(cmds []string) (*analysis, error) {
	modRoot, err := filepath.Abs("../..")
	if err != nil {
		return nil, err
	}
	args := append([]string{"list", "-deps", "-export", "-compiled", "-tags", buildTags,
		"-json=ImportPath,Dir,Export,Standard,CompiledGoFiles,Deps,Error"}, cmds...)
	cmd := exec.Command("go", args...)
	cmd.Dir = modRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if os.Getenv("CGO_CFLAGS") == "" {
		cmd.Env = append(cmd.Env, "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	pkgs := map[string]*listedPkg{}
	var order []*listedPkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, err
		}
		if p.Error != nil {
			return nil, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = &p
		order = append(order, &p)
	}
	if pkgs[nvmlPkg] == nil {
		return nil, fmt.Errorf("%s do not link %s", strings.Join(cmds, " "), nvmlPkg)
	}

	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		p := pkgs[path]
		if p == nil || p.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(p.Export)
	})

	g, err := nvmlGraph(fset, imp, pkgs[nvmlPkg])
	if err != nil {
		return nil, err
	}
	a := &analysis{
		wrapped:   len(g.wrapped),
		entries:   map[string]bool{},
		unguarded: map[string][]string{},
		guarded:   map[string]bool{},
	}

	// The go-nvml interfaces' methods by name, for calls through mirror interfaces.
	nvmlTypes, err := imp.Import(nvmlPkg)
	if err != nil {
		return nil, err
	}
	ifaceMethods := map[string][]*types.Func{}
	for _, name := range nvmlTypes.Scope().Names() {
		tn, ok := nvmlTypes.Scope().Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		if it, ok := tn.Type().Underlying().(*types.Interface); ok {
			for i := 0; i < it.NumMethods(); i++ {
				m := it.Method(i)
				ifaceMethods[m.Name()] = append(ifaceMethods[m.Name()], m)
			}
		}
	}

	for _, p := range order {
		if p.Standard || p.ImportPath == nvmlPkg || !contains(p.Deps, nvmlPkg) {
			continue
		}
		files, info, _, err := check(fset, imp, p)
		if err != nil {
			return nil, err
		}
		verifyOff := false
		for _, f := range files {
			ast.Inspect(f, func(n ast.Node) bool {
				if c, ok := n.(*ast.CallExpr); ok && calleeName(c) == "WithVerifySymbols" && len(c.Args) == 1 {
					if id, ok := c.Args[0].(*ast.Ident); ok && id.Name == "false" {
						verifyOff = true
					}
				}
				return true
			})
		}
		referenced := false
		for _, f := range files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				guards := symbolChecks(fd.Body, !verifyOff)
				ast.Inspect(fd.Body, func(n ast.Node) bool {
					id, ok := n.(*ast.Ident)
					if !ok {
						return true
					}
					var keys []string
					if k := nvmlKey(info.Uses[id]); k != "" {
						keys = append(keys, k)
					} else if m, ok := info.Uses[id].(*types.Func); ok {
						keys = mirrorKeys(m, ifaceMethods)
					}
					if len(keys) == 0 {
						return true
					}
					referenced = true
					a.sites++
					site := fmt.Sprintf("%s (%s, %s)", relPos(fset.Position(id.Pos()), modRoot), fd.Name.Name, strings.Join(keys, " | "))
					for _, k := range keys {
						a.entries[k] = true
						direct := g.reach(k, false)
						for sym := range g.reach(k, true) {
							// Behind a symbol check of the caller's, or reached only
							// through a versioned fallback dlsym checked first.
							if guards[sym] || !direct[sym] && g.lookups[sym] {
								a.guarded[sym] = true
								continue
							}
							if len(a.unguarded[sym]) < 3 {
								a.unguarded[sym] = append(a.unguarded[sym], site)
							}
						}
					}
					return true
				})
			}
		}
		if referenced {
			a.pkgs = append(a.pkgs, p.ImportPath)
		}
	}
	if len(a.unguarded) == 0 {
		return nil, errors.New("no NVML entry point found: the analysis is broken")
	}
	return a, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func relPos(p token.Position, root string) string {
	if r, err := filepath.Rel(root, p.Filename); err == nil && !strings.HasPrefix(r, "..") {
		return fmt.Sprintf("%s:%d", r, p.Line)
	}
	if i := strings.Index(p.Filename, "/pkg/mod/"); i >= 0 {
		return fmt.Sprintf("%s:%d", p.Filename[i+len("/pkg/mod/"):], p.Line)
	}
	return fmt.Sprintf("%s:%d", p.Filename, p.Line)
}

// check parses and type-checks p's compiled files against its dependencies'
// export data.
func check(fset *token.FileSet, imp types.Importer, p *listedPkg) ([]*ast.File, *types.Info, *types.Package, error) {
	var files []*ast.File
	for _, name := range p.CompiledGoFiles {
		if !filepath.IsAbs(name) {
			name = filepath.Join(p.Dir, name)
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: imp}
	pkg, err := conf.Check(p.ImportPath, fset, files, info)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	return files, info, pkg, nil
}

// objKey names a function, method or package-level variable across
// type-checks: pkgpath.Name, pkgpath.Type.Method, pkgpath.var.Name.
func objKey(obj types.Object) string {
	if obj == nil || obj.Pkg() == nil {
		return ""
	}
	switch o := obj.(type) {
	case *types.Func:
		sig := o.Type().(*types.Signature)
		if r := sig.Recv(); r != nil {
			t := r.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok {
				return o.Pkg().Path() + "." + n.Obj().Name() + "." + o.Name()
			}
			return o.Pkg().Path() + ".?." + o.Name()
		}
		return o.Pkg().Path() + "." + o.Name()
	case *types.Var:
		if o.Pkg().Scope().Lookup(o.Name()) == obj {
			return o.Pkg().Path() + ".var." + o.Name()
		}
	}
	return ""
}

// nvmlKey is objKey for go-nvml's objects, "" for any other.
func nvmlKey(obj types.Object) string {
	if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != nvmlPkg {
		return ""
	}
	return objKey(obj)
}

// mirrorKeys returns the go-nvml interface methods a call of m reaches when m
// is a method of some other interface with a go-nvml method's name and
// signature (the value behind it may be an nvml.Device).
func mirrorKeys(m *types.Func, ifaceMethods map[string][]*types.Func) []string {
	sig := m.Type().(*types.Signature)
	if sig.Recv() == nil || !types.IsInterface(sig.Recv().Type()) {
		return nil
	}
	want := sigString(sig)
	var keys []string
	for _, c := range ifaceMethods[m.Name()] {
		if sigString(c.Type().(*types.Signature)) == want {
			keys = append(keys, objKey(c))
		}
	}
	return keys
}

func sigString(s *types.Signature) string {
	return types.TypeString(types.NewSignatureType(nil, nil, nil, s.Params(), s.Results(), s.Variadic()),
		func(p *types.Package) string { return p.Path() })
}

func calleeName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	}
	return ""
}

// symbolChecks returns the symbols body checks for with hasSymbol (go-nvlib;
// only while symbol verification is on) or LookupSymbol (go-nvml).
func symbolChecks(body ast.Node, hasSymbol bool) map[string]bool {
	out := map[string]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		c, ok := n.(*ast.CallExpr)
		if !ok || len(c.Args) != 1 {
			return true
		}
		if name := calleeName(c); name == "LookupSymbol" || hasSymbol && name == "hasSymbol" {
			if lit, ok := c.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					out[s] = true
				}
			}
		}
		return true
	})
	return out
}

// graph is go-nvml's call graph, from its functions, methods and function
// variables down to the C functions they call.
type graph struct {
	edges   map[string]map[string]bool // key -> keys it references
	checked map[string]map[string]bool // var key -> functions assigned after a dlsym check
	lookups map[string]bool            // symbols updateVersionedSymbols checks with dlsym
	csyms   map[string]string          // _Cfunc_ wrapper key -> C symbol
	wrapped map[string]bool            // every C symbol go-nvml wraps
	memo    [2]map[string]map[string]bool
}

func nvmlGraph(fset *token.FileSet, imp types.Importer, p *listedPkg) (*graph, error) {
	files, info, pkg, err := check(fset, imp, p)
	if err != nil {
		return nil, err
	}
	g := &graph{
		edges:   map[string]map[string]bool{},
		checked: map[string]map[string]bool{},
		lookups: map[string]bool{},
		csyms:   map[string]string{},
		wrapped: map[string]bool{},
		memo:    [2]map[string]map[string]bool{{}, {}},
	}
	edge := func(m map[string]map[string]bool, from, to string) {
		if from == "" || to == "" || from == to {
			return
		}
		if m[from] == nil {
			m[from] = map[string]bool{}
		}
		m[from][to] = true
	}
	refs := func(from string, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if id, ok := n.(*ast.Ident); ok {
				edge(g.edges, from, objKey(info.Uses[id]))
			}
			return true
		})
	}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				key := objKey(info.Defs[d.Name])
				if strings.HasPrefix(d.Name.Name, "_Cfunc_nvml") {
					sym := strings.TrimPrefix(d.Name.Name, "_Cfunc_")
					g.csyms[key] = sym
					g.wrapped[sym] = true
				}
				if d.Body == nil {
					continue
				}
				if d.Name.Name == "updateVersionedSymbols" {
					// `if l.dl.Lookup("X") == nil { v = X }`: X only after dlsym found it.
					ast.Inspect(d.Body, func(n ast.Node) bool {
						switch n := n.(type) {
						case *ast.CallExpr:
							if calleeName(n) == "Lookup" && len(n.Args) == 1 {
								if lit, ok := n.Args[0].(*ast.BasicLit); ok {
									s, _ := strconv.Unquote(lit.Value)
									g.lookups[s] = true
								}
							}
						case *ast.AssignStmt:
							for i, l := range n.Lhs {
								id, ok := l.(*ast.Ident)
								if !ok || i >= len(n.Rhs) {
									continue
								}
								lk := objKey(info.Uses[id])
								ast.Inspect(n.Rhs[i], func(r ast.Node) bool {
									if rid, ok := r.(*ast.Ident); ok {
										edge(g.checked, lk, objKey(info.Uses[rid]))
									}
									return true
								})
							}
						}
						return true
					})
					continue
				}
				refs(key, d.Body)
				// Assignments to package variables anywhere: the variable may hold the value.
				ast.Inspect(d.Body, func(n ast.Node) bool {
					as, ok := n.(*ast.AssignStmt)
					if !ok {
						return true
					}
					for i, l := range as.Lhs {
						if id, ok := l.(*ast.Ident); ok && i < len(as.Rhs) {
							if k := objKey(info.Uses[id]); strings.Contains(k, ".var.") {
								refs(k, as.Rhs[i])
							}
						}
					}
					return true
				})
			case *ast.GenDecl:
				for _, s := range d.Specs {
					vs, ok := s.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, name := range vs.Names {
						k := objKey(info.Defs[name])
						if i < len(vs.Values) {
							refs(k, vs.Values[i])
						} else if len(vs.Values) == 1 {
							refs(k, vs.Values[0])
						}
					}
				}
			}
		}
	}
	// Interface methods dispatch to go-nvml's implementations.
	scope := pkg.Scope()
	var ifaces, concrete []*types.TypeName
	for _, name := range scope.Names() {
		tn, ok := scope.Lookup(name).(*types.TypeName)
		if !ok || tn.IsAlias() {
			continue
		}
		if types.IsInterface(tn.Type()) {
			ifaces = append(ifaces, tn)
		} else {
			concrete = append(concrete, tn)
		}
	}
	for _, it := range ifaces {
		iface := it.Type().Underlying().(*types.Interface)
		for i := 0; i < iface.NumMethods(); i++ {
			m := iface.Method(i)
			for _, c := range concrete {
				ptr := types.NewPointer(c.Type())
				if !types.Implements(ptr, iface) {
					continue
				}
				sel := types.NewMethodSet(ptr).Lookup(m.Pkg(), m.Name())
				edge(g.edges, objKey(m), objKey(sel.Obj()))
			}
		}
	}
	if len(g.wrapped) == 0 || len(g.lookups) == 0 {
		return nil, fmt.Errorf("%s: no _Cfunc_nvml* wrappers or no updateVersionedSymbols checks found: the analysis is broken", p.ImportPath)
	}
	return g, nil
}

// reach returns the C symbols reachable from key; withChecked also follows
// the assignments updateVersionedSymbols makes after a dlsym check, and the
// symbols reached that way only count when dlsym checked that very symbol.
func (g *graph) reach(key string, withChecked bool) map[string]bool {
	mi := 0
	if withChecked {
		mi = 1
	}
	if r, ok := g.memo[mi][key]; ok {
		return r
	}
	out := map[string]bool{}
	seen := map[string]bool{key: true}
	stack := []string{key}
	for len(stack) > 0 {
		k := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if sym, ok := g.csyms[k]; ok {
			out[sym] = true
		}
		next := g.edges[k]
		if withChecked {
			for n := range g.checked[k] {
				if !seen[n] {
					seen[n] = true
					stack = append(stack, n)
				}
			}
		}
		for n := range next {
			if !seen[n] {
				seen[n] = true
				stack = append(stack, n)
			}
		}
	}
	g.memo[mi][key] = out
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, " ")
}
