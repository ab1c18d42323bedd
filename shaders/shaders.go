// Package shaders holds every WGSL kernel Hearth runs, one kernel family per
// file, embedded into the binary so the GPU path needs no files at run time.
//
// Math that several families share lives in include files, pasted in by an
// include line and named *_common.wgsl (reduce_common: the workgroup
// reductions; tanh_common: tanh_safe; glu_common: silu and gelu; q8_common: the 8-bit activations' arithmetic; q8_store_common: the integer products' output; norm_common, attention_common, attention_backward_common,
// lstm_common, conv_weight_common, conv1d_tiled_common, matmul_common,
// wbytes_common; matmul_reduce is one too). An include file is not a family: it is never
// compiled on its own, and its entry points, if any, count as its includers'.
//
// Every compute entry point (EntryPoints) has a CPU reference in Go and is
// dispatched by at least one test that compares the two, on lavapipe in
// `make test`. That rule is checked, in the manner of ggml's
// test-backend-ops: `make test` runs the suite with HEARTH_KERNEL_LOG set,
// so each test binary logs the kernels it dispatched (engine/gpu), and then
// fails if an entry point here was dispatched by none. A new entry point
// comes with its parity test; one that nothing dispatches is deleted.
package shaders

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

//go:embed *.wgsl
var files embed.FS

// includePrefix starts a line that is replaced by another file's text:
// `//!include matmul_common` pastes matmul_common.wgsl. WGSL has no include of
// its own, and families that share a binding contract (the matmuls) keep it
// in one place this way. Included files do not include further.
const includePrefix = "//!include "

// Source returns the WGSL text of the named family ("norm" or "norm.wgsl"),
// with its includes expanded.
func Source(name string) (string, error) { return source(files, name) }

func source(fsys fs.FS, name string) (string, error) {
	src, err := read(fsys, name)
	if err != nil {
		return "", err
	}
	if !strings.Contains(src, includePrefix) {
		return src, nil
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		inc, ok := strings.CutPrefix(strings.TrimSpace(line), includePrefix)
		if !ok {
			b.WriteString(line)
			continue
		}
		text, err := read(fsys, strings.TrimSpace(inc))
		if err != nil {
			return "", fmt.Errorf("shaders: %s: include: %w", name, err)
		}
		if strings.Contains(text, "\n"+includePrefix) || strings.HasPrefix(text, includePrefix) {
			return "", fmt.Errorf("shaders: %s: included %s includes again", name, inc)
		}
		b.WriteString(text)
		b.WriteString("\n")
	}
	return b.String(), nil
}

func read(fsys fs.FS, name string) (string, error) {
	if !strings.HasSuffix(name, ".wgsl") {
		name += ".wgsl"
	}
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", fmt.Errorf("shaders: no kernel family %q", strings.TrimSuffix(name, ".wgsl"))
	}
	return string(b), nil
}

// entryRE matches a compute entry point's name: the attributes between
// @compute and fn hold no braces or semicolons.
var entryRE = regexp.MustCompile(`@compute\b[^;{}]*?\bfn\s+([A-Za-z_][A-Za-z0-9_]*)`)

// commentRE matches a line comment, which may mention an entry point.
var commentRE = regexp.MustCompile(`//[^\n]*`)

// EntryPoints returns every compute entry point Hearth ships, as
// family.entry ("norm.rmsnorm", the name gpu.KernelSpec gives it), sorted. A
// family is a file that no other file includes; its entry points are the
// @compute functions of its text with its includes expanded. A file that is
// neither (dead code) is an error.
//
// These are the names `make test` checks against the suite's dispatches (see
// the package doc).
func EntryPoints() ([]string, error) { return entryPoints(files) }

func entryPoints(fsys fs.FS) ([]string, error) {
	names, err := fs.Glob(fsys, "*.wgsl")
	if err != nil {
		return nil, err
	}
	included := map[string]bool{}
	for _, name := range names {
		src, err := read(fsys, name)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(src, "\n") {
			if inc, ok := strings.CutPrefix(strings.TrimSpace(line), includePrefix); ok {
				included[strings.TrimSpace(inc)+".wgsl"] = true
			}
		}
	}
	var entries []string
	for _, name := range names {
		if included[name] {
			continue
		}
		family := strings.TrimSuffix(name, ".wgsl")
		src, err := source(fsys, family)
		if err != nil {
			return nil, err
		}
		found := entryNames(src)
		if len(found) == 0 {
			return nil, fmt.Errorf("shaders: %s has no @compute entry point and no family includes it", name)
		}
		for _, entry := range found {
			entries = append(entries, family+"."+entry)
		}
	}
	slices.Sort(entries)
	return entries, nil
}

// entryNames returns the names of the @compute functions in WGSL text.
func entryNames(src string) []string {
	var names []string
	for _, m := range entryRE.FindAllStringSubmatch(commentRE.ReplaceAllString(src, ""), -1) {
		names = append(names, m[1])
	}
	return names
}
