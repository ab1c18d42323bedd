//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package gguf

import (
	"errors"
	"math"
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only. The pages are shared with the page
// cache, so opening a model costs no copy and no memory of its own.
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size <= 0 || size > math.MaxInt {
		return nil, errors.New("gguf: file size cannot be mapped")
	}
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmapFile(b []byte) error { return syscall.Munmap(b) }
