package provider

import (
	"testing"
	"time"
)

// Every wait between list refreshes lies in [interval, interval × 1.1), and
// the waits differ, so clusters started together do not refresh in lockstep.
func TestListRefreshJitter(t *testing.T) {
	const interval = 5 * time.Minute
	hi := interval + time.Duration(listJitter*float64(interval))
	seen := map[time.Duration]bool{}
	lo, top := hi, time.Duration(0)
	for range 1000 {
		d := nextListRefresh(interval)
		if d < interval || d >= hi {
			t.Fatalf("refresh wait %v outside [%v, %v)", d, interval, hi)
		}
		seen[d] = true
		lo, top = min(lo, d), max(top, d)
	}
	if len(seen) < 900 {
		t.Fatalf("only %d distinct waits in 1000 draws: not jittered", len(seen))
	}
	// The draws spread over most of the 30 s window.
	if spread := top - lo; spread < 25*time.Second {
		t.Fatalf("waits spread over %v only, want most of %v", spread, hi-interval)
	}
}
