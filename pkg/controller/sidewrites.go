package controller

import (
	"errors"
	"sync"
)

// sideWrites runs the writes of a sync that the Jobs do not wait for (a
// new headless Service, a JobSet's first template revision) beside the Job
// creates, so that the first Job is not behind them. The sync waits for
// them before it writes the status.
type sideWrites struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (w *sideWrites) start(fn func() error) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		if err := fn(); err != nil {
			w.mu.Lock()
			w.errs = append(w.errs, err)
			w.mu.Unlock()
		}
	}()
}

// wait returns once every write started has returned, with their errors.
func (w *sideWrites) wait() error {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}
