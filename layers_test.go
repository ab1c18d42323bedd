package main

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A layerRule limits what one layer of the tree may use, as README's
// "Layers" section states it. Paths are relative to the module; "x/..."
// is x and every package below it, as the go command reads it. Only the
// packages' own files count, not their tests: a test may build its
// fixtures (a synthetic model, a device for a parity check) with any
// package.
type layerRule struct {
	layer string
	// only, when set, lists the module's packages the layer may import;
	// every other one is refused. Packages outside the module are free.
	only []string
	// never lists the module's packages the layer may not import.
	never []string
	// calls lists functions the layer may not call, as "pkg.Name"; a
	// Name ending in "*" is a prefix.
	calls []string
	why   string
}

// engineClient is the rule of the engine's clients besides the studio:
// the command line and the API server. A device and the runners on it are
// app's (app.Engine, app.LoadModel), so they neither import the GPU
// runtime and the kernels nor build a runner or a GPU model themselves.
var engineClient = layerRule{
	never: []string{"engine/gpu/...", "engine/ops/...", "shaders/..."},
	calls: []string{"engine/model.NewCPU", "engine/model.NewGPU*", "training.Run", "*.NewGPU*"},
	why:   "app is the only door to the GPU: open models through app.Engine or app.LoadModel",
}

// belowApp is what no package under app may import: app is built on the
// engine, training and speech, never the other way round.
var belowApp = []string{"app/...", "ui/..."}

// layerRules are Hearth's layers, from the top.
var layerRules = []layerRule{
	{layer: "ui/...", only: []string{"app/...", "assets/...", "internal/..."},
		why: "ui talks only to app (DESIGN.md): give it what it needs through app"},
	withLayer("app/cli/...", engineClient),
	withLayer("app/server/...", engineClient),
	{layer: "app/...", never: []string{"ui/..."}, why: "app is UI-free"},
	{layer: "training/...", never: belowApp, why: "training is below app"},
	{layer: "vocoder/...", never: append(slices.Clone(belowApp), "training/..."), why: "speech is below app and beside training"},
	{layer: "engine/...", never: append(slices.Clone(belowApp), "training/...", "vocoder/..."),
		why: "the engine is the floor training and speech stand on"},
	{layer: "gguf/...", never: append(slices.Clone(belowApp), "engine/...", "training/...", "vocoder/..."),
		why: "file formats are the ground floor"},
	{layer: "safetensors/...", never: append(slices.Clone(belowApp), "engine/...", "training/...", "vocoder/..."),
		why: "file formats are the ground floor"},
	{layer: "pth/...", never: append(slices.Clone(belowApp), "engine/...", "training/...", "vocoder/..."),
		why: "file formats are the ground floor"},
	{layer: "shaders/...", never: append(slices.Clone(belowApp), "engine/...", "training/...", "vocoder/..."),
		why: "shaders are the ground floor"},
	{layer: "internal/...", never: belowApp, why: "internal helpers serve every layer, so they import none above the engine"},
}

func withLayer(layer string, r layerRule) layerRule {
	r.layer = layer
	return r
}

// matchPattern reports whether pkg is pattern or, for "x/...", x or a
// package below it.
func matchPattern(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// matchCall reports whether call ("pkg.Name") is what pattern forbids.
func matchCall(pattern, call string) bool {
	i, j := strings.LastIndex(pattern, "."), strings.LastIndex(call, ".")
	if i < 0 || j < 0 {
		return false
	}
	ppkg, pname := pattern[:i], pattern[i+1:]
	cpkg, cname := call[:j], call[j+1:]
	if ppkg != "*" && !matchPattern(ppkg, cpkg) {
		return false
	}
	if prefix, ok := strings.CutSuffix(pname, "*"); ok {
		return strings.HasPrefix(cname, prefix)
	}
	return cname == pname
}

// layerViolations checks package pkg's imports and calls of the module's
// packages (paths relative to the module, calls as "pkg.Name") against
// rules and says what breaks which rule.
func layerViolations(rules []layerRule, pkg string, imports, calls []string) []string {
	var bad []string
	for _, r := range rules {
		if !matchPattern(r.layer, pkg) {
			continue
		}
		for _, imp := range imports {
			allowed := len(r.only) == 0 || slices.ContainsFunc(r.only, func(p string) bool { return matchPattern(p, imp) })
			refused := slices.ContainsFunc(r.never, func(p string) bool { return matchPattern(p, imp) })
			if !allowed || refused {
				bad = append(bad, fmt.Sprintf("%s imports %s: %s", pkg, imp, r.why))
			}
		}
		for _, c := range calls {
			if slices.ContainsFunc(r.calls, func(p string) bool { return matchCall(p, c) }) {
				bad = append(bad, fmt.Sprintf("%s calls %s: %s", pkg, c, r.why))
			}
		}
	}
	return bad
}

// TestLayerRuleCatchesForbiddenUses runs layerViolations on made-up
// packages, so that TestLayers passing means the tree obeys the rules and
// not that the check sees nothing.
func TestLayerRuleCatchesForbiddenUses(t *testing.T) {
	for _, c := range []struct {
		pkg            string
		imports, calls []string
		want           int
	}{
		{"ui", []string{"app", "app/settings", "assets", "internal/units"}, nil, 0},
		{"ui", []string{"app", "engine/gpu"}, nil, 1},
		{"ui", []string{"training/data", "vocoder"}, nil, 2},
		{"ui/widgets", []string{"engine/model"}, nil, 1},
		{"app/cli", []string{"app", "engine/model", "engine/chat", "training", "vocoder"}, []string{"engine/model.NewSession", "engine/model.Load"}, 0},
		{"app/cli", []string{"engine/gpu"}, nil, 1},
		{"app/cli", []string{"engine/ops/ref"}, nil, 1},
		{"app/server", []string{"shaders"}, nil, 1},
		{"app/cli", nil, []string{"engine/model.NewGPU"}, 1},
		{"app/cli", nil, []string{"engine/model.NewCPU"}, 1},
		{"app/cli", nil, []string{"vocoder.NewGPUStyleEncoder", "training.Run", "training.RunConfig"}, 2},
		{"app", []string{"engine/gpu", "training", "vocoder"}, []string{"engine/model.NewGPU"}, 0},
		{"app/library", []string{"ui"}, nil, 1},
		{"engine/model", []string{"engine/gpu", "training/adapter"}, nil, 1},
		{"gguf", []string{"engine/gpu"}, nil, 1},
		{"training", []string{"engine/model", "app/settings"}, nil, 1},
		{"uikit", []string{"engine/gpu"}, nil, 0}, // not under ui/
	} {
		got := layerViolations(layerRules, c.pkg, c.imports, c.calls)
		if len(got) != c.want {
			t.Errorf("%s importing %v, calling %v: %d violations, want %d:\n%s",
				c.pkg, c.imports, c.calls, len(got), c.want, strings.Join(got, "\n"))
		}
	}
}

// TestLayers holds every package of the module to layerRules.
func TestLayers(t *testing.T) {
	module, err := modulePath("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	pkgs, err := packageUses(".", module)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ui", "app/cli", "app/server", "engine/model", "gguf"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("package %s was not found: the walk of the tree is broken", want)
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		u := pkgs[pkg]
		for _, v := range layerViolations(layerRules, pkg, u.imports, u.names) {
			t.Error(v)
		}
	}
}

// uses are a package's imports of the module's packages and the names of
// theirs it uses ("engine/model.NewGPU"), relative to the module.
type uses struct{ imports, names []string }

// packageUses reads every package under root (skipping testdata, vendor
// and hidden folders) from its non-test files, whatever their build
// constraints, so a file for another system cannot hide an import.
func packageUses(root, module string) (map[string]*uses, error) {
	pkgs := map[string]*uses{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		u := pkgs[pkg]
		if u == nil {
			u = &uses{}
			pkgs[pkg] = u
		}
		return fileUses(p, module, u)
	})
	for _, u := range pkgs {
		slices.Sort(u.imports)
		u.imports = slices.Compact(u.imports)
		slices.Sort(u.names)
		u.names = slices.Compact(u.names)
	}
	return pkgs, err
}

// fileUses adds the module's packages the Go file at p imports, and the
// names of theirs it uses, to u.
func fileUses(p, module string, u *uses) error {
	f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	local := map[string]string{} // the file's name for a package → its path
	for _, spec := range f.Imports {
		full, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return fmt.Errorf("%s: import %s: %w", p, spec.Path.Value, err)
		}
		rel, ok := strings.CutPrefix(full, module+"/")
		if !ok {
			continue
		}
		u.imports = append(u.imports, rel)
		name := path.Base(rel)
		if spec.Name != nil {
			name = spec.Name.Name
		}
		local[name] = rel
	}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				if rel, ok := local[id.Name]; ok {
					u.names = append(u.names, rel+"."+sel.Sel.Name)
				}
			}
		}
		return true
	})
	return nil
}

// modulePath reads the module line of a go.mod file.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if m, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", gomod, err)
	}
	return "", errors.New(gomod + ": no module line")
}
