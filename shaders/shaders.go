// Package shaders holds every WGSL kernel Hearth runs, one kernel family per
// file, embedded into the binary so the GPU path needs no files at run time.
package shaders

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.wgsl
var files embed.FS

// Source returns the WGSL text of the named family ("rmsnorm" or "rmsnorm.wgsl").
func Source(name string) (string, error) {
	if !strings.HasSuffix(name, ".wgsl") {
		name += ".wgsl"
	}
	b, err := files.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("shaders: no kernel family %q", strings.TrimSuffix(name, ".wgsl"))
	}
	return string(b), nil
}

// Names lists the embedded kernel families, sorted, without the .wgsl suffix.
func Names() []string {
	entries, _ := fs.ReadDir(files, ".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".wgsl"))
	}
	sort.Strings(names)
	return names
}
