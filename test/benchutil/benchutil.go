// Package benchutil holds the small helpers that the cluster benchmarks
// share.
package benchutil

import (
	"sync"
	"testing"
)

// Parallel runs fn(0..n-1) from the given number of goroutines and fails
// the benchmark with the first error once all have returned.
func Parallel(b *testing.B, n, goroutines int, fn func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	var once sync.Once
	var first error
	for w := 0; w < goroutines; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}
