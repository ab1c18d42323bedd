package download

import (
	"context"
	"fmt"
	"os"
	"time"
)

// lockPoll is how often a waiting download retries the lock: a waiter is
// waiting for a whole model to arrive, so a fifth of a second costs nothing.
const lockPoll = 200 * time.Millisecond

// lockFile takes an exclusive lock on path (created if missing), waiting
// while another process or goroutine holds it; waiting, when not nil, is
// called once if it has to wait. The lock is an OS lock on the open file
// (flock, LockFileEx), so a process that dies releases it: there is no
// stale lock to clean up by hand.
//
// unlock removes the file before releasing the lock; a waiter that then
// gets the lock on the removed file sees that path no longer names it and
// starts over, so two holders never coexist.
func lockFile(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	told := false
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("download: lock %s: %w", path, err)
		}
		for {
			ok, err := tryLock(f)
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("download: lock %s: %w", path, err)
			}
			if ok {
				break
			}
			if !told && waiting != nil {
				waiting()
			}
			told = true
			select {
			case <-ctx.Done():
				f.Close()
				return nil, fmt.Errorf("download: waiting for %s: %w", path, ctx.Err())
			case <-time.After(lockPoll):
			}
		}
		held, herr := f.Stat()
		named, nerr := os.Stat(path)
		if herr == nil && nerr == nil && os.SameFile(held, named) {
			return func() {
				// Windows cannot remove an open file; the lock file then
				// stays, empty and harmless, for the next download.
				os.Remove(path)
				unlockFile(f)
				f.Close()
			}, nil
		}
		unlockFile(f)
		f.Close()
	}
}
