// Package shaders holds every WGSL kernel Hearth runs, one kernel family per
// file, embedded into the binary so the GPU path needs no files at run time.
package shaders

import (
	"embed"
	"fmt"
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
func Source(name string) (string, error) {
	src, err := read(name)
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
		text, err := read(strings.TrimSpace(inc))
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

func read(name string) (string, error) {
	if !strings.HasSuffix(name, ".wgsl") {
		name += ".wgsl"
	}
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("shaders: no kernel family %q", strings.TrimSuffix(name, ".wgsl"))
	}
	return string(b), nil
}
