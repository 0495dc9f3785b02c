package bench

import (
	"time"

	"github.com/cloudgate/cloudgate/provider"
)

// The fleet scenario runs in real time (its limiter's clock is a real
// redis-server's); these helpers let it compress time by a factor f
// (--time-factor, default 1: uncompressed). Every other scenario runs in
// virtual time and uses none of them.

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) / f)
}

// clientTimeoutAt is clientTimeout compressed by f, at least 1 s real.
func clientTimeoutAt(f float64) time.Duration {
	return max(scale(clientTimeout, f), time.Second)
}

// compressConfig divides cfg's durations by f and multiplies its rates by
// f, as the fleet's compressed time requires. At f = 1 it changes nothing.
func compressConfig(cfg *provider.Config, f float64) {
	sd := func(d *provider.Duration) { d.Duration = scale(d.Duration, f) }
	cfg.Limits.Read.QPS *= f
	cfg.Limits.Write.QPS *= f
	sd(&cfg.Cache.NegativeTTL)
	sd(&cfg.Cache.StaleIfError)
	sd(&cfg.Limits.Read.WaitTimeout)
	sd(&cfg.Limits.Write.WaitTimeout)
	sd(&cfg.Breaker.Interval)
	sd(&cfg.Breaker.OpenTimeout)
	sd(&cfg.Breaker.MinOpenTimeout)
	sd(&cfg.Throttle.MaxRetryAfter)
	sd(&cfg.Batch.ListInterval)
	sd(&cfg.Batch.MaxWait)
	sd(&cfg.NotFoundGuard.GracePeriod)
	sd(&cfg.NotFoundGuard.ConfirmAfter)
	for name, m := range cfg.Methods {
		if m.TTL != nil {
			m.TTL = &provider.Duration{Duration: scale(m.TTL.Duration, f)}
		}
		m.QPS *= f
		cfg.Methods[name] = m
	}
}
