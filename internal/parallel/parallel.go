// Package parallel runs a loop over [0, n) on the cores, in contiguous
// ranges, for the CPU paths whose items are independent (rows of a
// product, tokens of a batch).
package parallel

import (
	"runtime"
	"sync"
)

// For calls f over [0, n) split into at most GOMAXPROCS contiguous ranges
// of at least minPer items each, the last on the calling goroutine; fewer
// than 2·minPer items run there alone, where a goroutine would cost more
// than it saves. Every range ends before For returns.
func For(n, minPer int, f func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(minPer, 1))
	if workers <= 1 {
		f(0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers - 1 {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Go(func() { f(lo, hi) })
	}
	f(n*(workers-1)/workers, n)
	wg.Wait()
}
