package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Probe asks whether this process reaches the fleet's Redis, as a member would
// (the same address, credentials, TLS, Sentinel or Cluster), without joining the
// fleet: a replica that does not lead has no Fleet, yet its readiness must say whether
// it could serve once it leads (failureMode closed admits nothing without Redis).
type Probe struct {
	target  string
	timeout time.Duration
	client  redis.UniversalClient
}

// probeTimeout is the least a probe waits for Redis' answer: a readiness probe that
// fails on one answer slower than redisTimeout (50 ms by default, sized for an
// admission's round trip) would flap on a loaded node.
const probeTimeout = time.Second

// NewProbe validates cfg and reads its password files; it does not connect yet.
// Errors name the YAML field; none holds a password.
func NewProbe(cfg Config) (*Probe, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	t := max(cfg.RedisTimeout.Duration, probeTimeout)
	client, err := newClient(cfg, t)
	if err != nil {
		return nil, err
	}
	return &Probe{target: cfg.redisTarget(), timeout: t, client: client}, nil
}

// Ping sends PING, bounded by ctx and the probe's timeout. Its error names the
// Redis it tried (never credentials) and why it got no answer.
func (p *Probe) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	err := p.client.Ping(ctx).Err()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("Redis at %s: no answer to PING within %v", p.target, p.timeout)
	}
	return fmt.Errorf("Redis at %s: %s", p.target, redisErrorText(err))
}

// Close closes the probe's connections.
func (p *Probe) Close() error { return p.client.Close() }
