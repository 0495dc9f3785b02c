// Package monotime is a process-wide monotonic clock for hot paths: it
// reads only the monotonic clock, which costs about half of time.Now
// (time.Now reads the wall clock too).
//
// Now returns start.Add(time.Since(start)), where start is a time.Now taken
// when the process started. Such a Time carries a monotonic reading, and
// Sub, Before, After and Equal between two Times that both carry one use
// only the monotonic readings: that is all the token buckets (through
// golang.org/x/time/rate, whose arithmetic is t.Sub) and the cache's TTL
// checks do with it. Its wall-clock part is start's wall clock plus the
// monotonic time elapsed, which drifts from the real wall clock when the
// system clock is set; nothing in cloudgate uses it (never print it, send
// it, or compare it with a Time from another clock).
package monotime

import (
	"time"

	"k8s.io/utils/clock"
)

// start is the origin of Now; it carries a monotonic reading.
var start = time.Now()

// Now returns the current time on the monotonic clock (see the package
// comment): start.Add(time.Since(start)).
func Now() time.Time { return start.Add(time.Since(start)) }

// Seconds returns the whole seconds from the process's start to t, a Time
// from Now, by t's monotonic reading (for counting in one-second slots).
func Seconds(t time.Time) int64 { return int64(t.Sub(start) / time.Second) }

// Since returns the time elapsed since t, as time.Since does; with a t
// from Now it reads only the monotonic clock.
func Since(t time.Time) time.Duration { return time.Since(t) }

// Clock is the real clock (k8s.io/utils/clock.RealClock) whose Now is the
// monotonic Now. Its timers and tickers are RealClock's.
type Clock struct{ clock.RealClock }

// Now returns monotime.Now().
func (Clock) Now() time.Time { return Now() }

// Since returns time.Since(t).
func (Clock) Since(t time.Time) time.Duration { return time.Since(t) }

// Real replaces the real clock (nil or a clock.RealClock value) by Clock,
// and returns any other clock (a fake one, in tests) unchanged.
func Real(c clock.Clock) clock.Clock {
	switch c.(type) {
	case nil, clock.RealClock, *clock.RealClock:
		return Clock{}
	}
	return c
}

// RealPassive is Real for a clock.PassiveClock.
func RealPassive(c clock.PassiveClock) clock.PassiveClock {
	switch c.(type) {
	case nil, clock.RealClock, *clock.RealClock:
		return Clock{}
	}
	return c
}
