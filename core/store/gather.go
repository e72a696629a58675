package store

import "time"

// gather decides how long a transaction waits for more writes before it
// commits. A commit's cost is mostly its disk syncs and the pages it
// writes once for all its writes (the meta page, the freelist, the roots of
// the trees), the same for one write as for a hundred: while writes arrive
// more often than once a window, waiting up to the window lets the next
// ones share them; while they arrive less often, a write commits at once,
// for nothing would join it. It belongs to the committer.
type gather struct {
	window time.Duration // Options.Gather; 0: never wait
	gap    time.Duration // the mean time between arrivals, recent ones weighing most
	last   time.Time     // the last arrival
}

// gapWeight is the weight of the newest gap in the mean, as a shift: 1/8.
const gapWeight = 3

// idleGaps caps one gap at this many windows, so a quiet hour counts no
// more than a short pause and a burst after it is gathered after a few
// arrivals. The mean starts there.
const idleGaps = 4

func newGather(window time.Duration) gather {
	return gather{window: window, gap: idleGaps * window}
}

// arrived notes a write's arrival at t.
func (g *gather) arrived(t time.Time) {
	if g.window == 0 {
		return
	}
	gap := min(t.Sub(g.last), idleGaps*g.window)
	if g.last.IsZero() || gap < 0 {
		gap = idleGaps * g.window
	}
	g.last = t
	g.gap += (gap - g.gap) >> gapWeight
}

// wait returns how long a transaction whose first write arrived at first
// waits, from now, for more: what is left of the window while writes
// arrive more often than once a window, else 0.
func (g *gather) wait(first, now time.Time) time.Duration {
	if g.window == 0 || g.gap >= g.window {
		return 0
	}
	return max(0, first.Add(g.window).Sub(now))
}
