package provider

import (
	"context"
	"fmt"
	"sync"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// ReadinessChecker is a cloud that says whether this replica could serve its cloud
// calls if it led: cloudgate's registered cloud implements it, and a CCM built with
// cmd/ccm serves it as /readyz (--readyz-bind-address), which the chart's
// readinessProbe asks, so a rollout stops at a new Pod that could not serve instead of
// handing the Lease to it. Find it through Unwrapper, as the CCM wraps the cloud.
type ReadinessChecker interface {
	// Ready returns nil when this replica can serve, else why not and what to fix.
	Ready(ctx context.Context) error
}

var _ ReadinessChecker = (*lazyCloud)(nil)

// Ready is what a replica can serve, asked in every replica (a standby's fleet
// membership is built only when it leads, so it cannot be asked): with limits.shared
// and failureMode closed it needs Redis, since a member cut from Redis admits no cloud
// call once the others may have freed its share; Ready sends Redis a PING as a member
// would connect (address, credentials, TLS) and fails when it gets no answer. In
// failureMode open (the default) a member without Redis serves its floor, and without
// limits.shared (mode shadow takes none) there is no fleet: Ready is nil.
func (l *lazyCloud) Ready(ctx context.Context) error {
	s := l.cfg.Limits.Shared
	if s == nil || s.FailureMode != fleet.FailureClosed {
		return nil
	}
	p, err := l.ready.probe(*s)
	if err != nil {
		return fmt.Errorf("limits.shared.failureMode is closed and its Redis cannot be asked: %w", err)
	}
	if err := p.Ping(ctx); err != nil {
		return fmt.Errorf("limits.shared.failureMode is closed and %w: without Redis this member would admit no cloud call (failureMode closed keeps the account's quota only through Redis); "+
			"make Redis reachable (limits.shared.redis: address, password, TLS; redis.* in the chart), or set limits.shared.failureMode: open to serve a floor without it", err)
	}
	return nil
}

// readiness holds Ready's probe: one Redis client per process, made at the first
// readiness check that can make it, and closed with the cloud.
type readiness struct {
	mu     sync.Mutex
	p      *fleet.Probe
	closed bool
}

func (r *readiness) probe(cfg fleet.Config) (*fleet.Probe, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("cloudgate: closed")
	}
	if r.p == nil {
		// Not kept on error: a password file that appears later is read then.
		p, err := fleet.NewProbe(cfg)
		if err != nil {
			return nil, err
		}
		r.p = p
	}
	return r.p, nil
}

func (r *readiness) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.p != nil {
		_ = r.p.Close()
		r.p = nil
	}
}
