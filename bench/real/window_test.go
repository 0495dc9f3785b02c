//go:build linux

package real

import (
	"testing"
	"time"
)

func TestWindowFor(t *testing.T) {
	for _, c := range []struct {
		round, want time.Duration
	}{
		{100 * time.Second, minWindow},        // 3.3 rounds fit in the TTL's minimum
		{355 * time.Second, 20 * time.Minute}, // 1,171 s rounded up to whole periods
		{580 * time.Second, 35 * time.Minute}, // 1,914 s
		{600 * time.Second, 35 * time.Minute}, // 1,980 s
	} {
		w := windowFor(c.round)
		if w != c.want {
			t.Errorf("windowFor(%v) = %v, want %v", c.round, w, c.want)
		}
		if w < time.Duration(minRounds)*c.round {
			t.Errorf("windowFor(%v) = %v holds fewer than %d rounds", c.round, w, minRounds)
		}
	}
}
