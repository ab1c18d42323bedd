//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package gguf

import (
	"errors"
	"os"
)

// mapFile always fails here, so Open reads the file through an *os.File.
func mapFile(*os.File, int64) ([]byte, error) {
	return nil, errors.New("gguf: memory mapping is not implemented on this OS")
}

func unmapFile([]byte) error { return nil }
