//go:build linux && !race && !msan && !asan

package rawsock

import (
	"testing"
	"time"
)

// AdvanceClock moves the clock of the idle probe d ahead until the test
// ends.
func AdvanceClock(t testing.TB, d time.Duration) {
	prev := since
	since = func() time.Duration { return prev() + d }
	t.Cleanup(func() { since = prev })
}
