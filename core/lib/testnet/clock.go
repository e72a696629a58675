package testnet

import (
	"sync/atomic"
	"time"
)

// Clock is a settable clock for tests, safe for concurrent use: Now reads
// it (the zero Clock reads the Unix epoch), Advance and Set move it.
type Clock struct{ ns atomic.Int64 }

// NewClock returns a clock reading t.
func NewClock(t time.Time) *Clock {
	c := new(Clock)
	c.Set(t)
	return c
}

func (c *Clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *Clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *Clock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
