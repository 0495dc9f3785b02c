package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cloudgate/cloudgate/bench/simcloud"
)

// The fleet chaos variant: Redis killed and restarted mid-scale-up.

// chaosRun kills and restarts Redis during the scale-up and watches every
// member's cloudgate_fleet_fallback.
type chaosRun struct {
	srv                   *simcloud.Server
	members               []*fleetMember
	f                     float64
	from                  time.Time
	done                  chan struct{}
	err                   error
	killedAt, restartedAt time.Time
	fellBack, rejoined    []bool
	rejoinAt              time.Time
	thrBefore, thrAfter   int64
	outageReads           float64
}

func startFleetChaos(ctx context.Context, o *FleetOptions, rs *redisServer, members []*fleetMember, srv *simcloud.Server, from time.Time, progress io.Writer, label string) *chaosRun {
	c := &chaosRun{srv: srv, members: members, f: o.TimeFactor, from: from, done: make(chan struct{}),
		fellBack: make([]bool, len(members)), rejoined: make([]bool, len(members))}
	served := func() int64 {
		var n int64
		for _, m := range members {
			n += m.reads.served.Load()
		}
		return n
	}
	go func() {
		defer close(c.done)
		if !sleepCtx(ctx, scale(o.ChaosAfter, c.f)) {
			c.err = ctx.Err()
			return
		}
		c.thrBefore = srv.Counters().TotalThrottled()
		c.killedAt = time.Now()
		readsAt := served()
		rs.Kill()
		fmt.Fprintf(progress, "  %s: Redis killed at t=%.0fs\n", label, c.killedAt.Sub(from).Seconds()*c.f)
		outageEnd := c.killedAt.Add(scale(o.ChaosOutage, c.f))
		poll := func(until time.Time, check func(i int, fallback bool)) bool {
			for time.Now().Before(until) {
				for i, m := range members {
					check(i, gauge(m.reg, "cloudgate_fleet_fallback") > 0)
				}
				if !sleepCtx(ctx, 10*time.Millisecond) {
					return false
				}
			}
			return true
		}
		if !poll(outageEnd, func(i int, fb bool) { c.fellBack[i] = c.fellBack[i] || fb }) {
			c.err = ctx.Err()
			return
		}
		c.outageReads = float64(served()-readsAt) / (time.Since(c.killedAt).Seconds() * c.f)
		if err := rs.Restart(); err != nil {
			c.err = err
			return
		}
		c.restartedAt = time.Now()
		fmt.Fprintf(progress, "  %s: Redis restarted at t=%.0fs\n", label, c.restartedAt.Sub(from).Seconds()*c.f)
		// Members rejoin at their next heartbeat (1 s real); allow 10 s real.
		limit := time.Now().Add(10 * time.Second)
		_ = poll(limit, func(i int, fb bool) {
			if !fb && !c.rejoined[i] {
				c.rejoined[i] = true
				c.rejoinAt = time.Now()
			}
			if fb {
				c.rejoined[i] = false
			}
		})
		// Throttling caused by the switch back settles within a simulated minute.
		if !sleepCtx(ctx, scale(time.Minute, c.f)) {
			c.err = ctx.Err()
			return
		}
		c.thrAfter = srv.Counters().TotalThrottled()
	}()
	return c
}

func (c *chaosRun) wait(ctx context.Context) error {
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *chaosRun) result(o *FleetOptions) *FleetChaos {
	sim := func(t time.Time) float64 { return t.Sub(c.from).Seconds() * c.f }
	r := &FleetChaos{KilledAt: sim(c.killedAt), RestartedAt: sim(c.restartedAt),
		ThrottledAroundOutage: c.thrAfter - c.thrBefore, OutageReadsPerSec: c.outageReads}
	for i := range c.members {
		if c.fellBack[i] {
			r.MembersFellBack++
		}
		if c.rejoined[i] {
			r.MembersRejoined++
		}
	}
	if r.MembersRejoined == len(c.members) {
		v := c.rejoinAt.Sub(c.restartedAt).Seconds() * c.f
		r.RejoinSeconds = &v
	}
	r.FallbackBound = 2 * int64(o.ReadBurst+o.WriteBurst)
	return r
}
