//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package download

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's flock without blocking; false means another open file
// holds it.
func tryLock(f *os.File) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR) {
		return false, nil
	}
	return err == nil, err
}

func unlockFile(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
