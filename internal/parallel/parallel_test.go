package parallel

import (
	"runtime"
	"sync"
	"testing"
)

// TestForCoversEachItemOnce: every item of [0, n) is visited exactly once,
// for counts below, at and past the threshold and the cores.
func TestForCoversEachItemOnce(t *testing.T) {
	for _, n := range []int{0, 1, 7, 15, 16, 17, 1000} {
		for _, minPer := range []int{0, 1, 8} {
			seen := make([]int, n)
			var mu sync.Mutex
			ranges := 0
			For(n, minPer, func(lo, hi int) {
				mu.Lock()
				ranges++
				mu.Unlock()
				for i := lo; i < hi; i++ {
					seen[i]++
				}
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("n %d minPer %d: item %d visited %d times", n, minPer, i, c)
				}
			}
			if want := min(runtime.GOMAXPROCS(0), n/max(minPer, 1)); ranges != max(want, 1) {
				t.Errorf("n %d minPer %d: %d ranges, want %d", n, minPer, ranges, max(want, 1))
			}
		}
	}
}
