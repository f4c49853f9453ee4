package gen

import "time"

// Loop runs commit(0), commit(1), ... in a goroutine, pausing pause before
// each, until stop is closed or a commit fails: the writer beside which
// the tests run maintenance. The channel yields that failure, if any, and
// is closed when the loop ends. The pause is from one commit's end to the
// next one's start: on a loaded machine a ticker would make a writer that
// never stops committing.
func Loop(stop <-chan struct{}, pause time.Duration, commit func(i int) error) <-chan error {
	errs := make(chan error, 1)
	go func() {
		defer close(errs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(pause):
			}
			if err := commit(i); err != nil {
				errs <- err
				return
			}
		}
	}()
	return errs
}
