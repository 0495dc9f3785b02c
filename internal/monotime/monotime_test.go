package monotime

import (
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestNowIsMonotonic: Now carries a monotonic reading (so Sub and Before
// use it), never goes back, and agrees with time.Now's monotonic clock.
func TestNowIsMonotonic(t *testing.T) {
	prev := Now()
	if !strings.Contains(prev.String(), "m=+") {
		t.Fatalf("Now() = %v has no monotonic reading", prev)
	}
	for range 1000 {
		now := Now()
		if now.Before(prev) {
			t.Fatalf("Now went back: %v after %v", now, prev)
		}
		prev = now
	}
	before := time.Now()
	mid := Now()
	after := time.Now()
	if mid.Sub(before) < 0 || after.Sub(mid) < 0 {
		t.Fatalf("Now %v not between two time.Now readings %v and %v", mid, before, after)
	}
	if Seconds(start.Add(2500*time.Millisecond)) != 2 {
		t.Fatal("Seconds does not count whole seconds from start")
	}
}

// TestReal: only the real clock is replaced; a fake clock is kept.
func TestReal(t *testing.T) {
	fake := clocktesting.NewFakeClock(time.Unix(1, 0))
	cases := []struct {
		in   clock.Clock
		want clock.Clock
	}{
		{nil, Clock{}},
		{clock.RealClock{}, Clock{}},
		{&clock.RealClock{}, Clock{}},
		{fake, fake},
	}
	for _, c := range cases {
		if got := Real(c.in); got != c.want {
			t.Errorf("Real(%T) = %T, want %T", c.in, got, c.want)
		}
		var passive clock.PassiveClock
		if c.in != nil {
			passive = c.in
		}
		if got := RealPassive(passive); got != clock.PassiveClock(c.want) {
			t.Errorf("RealPassive(%T) = %T, want %T", c.in, got, c.want)
		}
	}
}
