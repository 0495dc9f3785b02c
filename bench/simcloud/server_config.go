package simcloud

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"strings"
	"time"
)

// Defaults applied by NewServer to zero-valued ServerConfig fields.
const (
	DefaultAddr         = "127.0.0.1:0"
	DefaultMaxBatchSize = 500
	DefaultListPageSize = 500
	DefaultHangTimeout  = 30 * time.Second
	DefaultRegion       = "region-1"
	DefaultCluster      = "kubernetes"
	// DefaultStormRetryAfter is the Retry-After of a ThrottleStorm 429 when
	// Faults.StormRetryAfter is zero.
	DefaultStormRetryAfter = time.Second
)

// DefaultZones are the zones AddInstances spreads instances over when
// ServerConfig.Zones is empty.
var DefaultZones = []string{"zone-a", "zone-b", "zone-c"}

// ServerConfig configures a simulated cloud. The zero value is a usable,
// unlimited, fault-free cloud on a random loopback port.
type ServerConfig struct {
	// InMemory serves only through Server.Transport, with no listener:
	// what a synctest bubble (virtual time) needs. Addr is then unused.
	InMemory bool
	// Addr is the listen address. Default "127.0.0.1:0" (a free port). The
	// host must be a loopback IP literal; the server never listens elsewhere.
	Addr string

	// Seed seeds every random draw (latency jitter and fault draws). Each
	// call draws the same four numbers in the same order, from a source
	// keyed by the seed, the call's method and URL and how many calls with
	// that key came before, so the same calls see the same outcomes for the
	// same seed and faults, whatever order concurrent calls arrive in.
	Seed int64

	// ReadQPS and ReadBurst are the account's read quota: a token bucket
	// refilled at ReadQPS tokens/s holding at most ReadBurst tokens (it
	// starts full). Every read call takes one token (a batch or a list page
	// is one call). Zero ReadQPS means unlimited; zero ReadBurst with a
	// positive ReadQPS means max(1, ceil(ReadQPS)).
	ReadQPS   float64
	ReadBurst int
	// WriteQPS and WriteBurst are the separate write quota, same rules.
	WriteQPS   float64
	WriteBurst int

	// BaseLatency is added to every call; Jitter adds a uniform random
	// [0, Jitter) on top. Both default to zero. The server sleeps before
	// it decides a call's fate and finishes the call even if the client has
	// given up meanwhile, so a write can land after its caller timed out,
	// as with a real cloud.
	BaseLatency time.Duration
	Jitter      time.Duration

	// MaxBatchSize is the most ids+names one BatchGetInstances call may
	// carry; more is HTTP 400. Default 500.
	MaxBatchSize int
	// ListPageSize is the default and maximum page size of ListInstances.
	// Default 500.
	ListPageSize int

	// HangTimeout caps how long a call picked by Faults.TimeoutRate hangs
	// before it answers 504 (it ends sooner when the client gives up).
	// Default 30s.
	HangTimeout time.Duration

	// APIKey, when set, is the only bearer token the server accepts. When
	// empty, any non-empty bearer token is accepted. A call without one is
	// HTTP 401. All callers share one account (one pair of buckets).
	APIKey Secret

	// Region and Zones are where AddInstances places instances: zone
	// i%len(Zones) for the i-th instance. Defaults "region-1" and
	// DefaultZones. Zone names must not contain "/".
	Region string
	Zones  []string

	// Clusters are the clusters ListClusters reports from the start.
	// Default ["kubernetes"]. Creating a route in another cluster adds it.
	Clusters []string

	// Faults are the faults in force from the start; see Server.SetFaults.
	Faults Faults
}

// Faults are injected failures. Each call draws its fate once, when it
// arrives; the first matching fault in this order wins: Outage,
// ThrottleStorm, the quota check, ErrorRate, AmbiguousRate, TimeoutRate. SpikeRate adds
// latency independently. The zero value injects nothing.
type Faults struct {
	// ErrorRate is the probability [0,1] that a call answers HTTP 500
	// InternalError. A failed write does not land.
	ErrorRate float64
	// AmbiguousRate is the probability [0,1] that a write is applied (it
	// lands in the write log) and then answered as if it failed: HTTP 500
	// for half of them, a hang ending in 504 for the other half. This is
	// the ambiguous write of a real cloud: the caller cannot tell it landed.
	// It shares its draw with ErrorRate (a call whose error draw is below
	// ErrorRate fails; below ErrorRate+AmbiguousRate, a write is ambiguous),
	// so ErrorRate+AmbiguousRate must not exceed 1. Reads are not affected.
	AmbiguousRate float64
	// TimeoutRate is the probability [0,1] that a call hangs until the
	// client gives up, the server closes, or ServerConfig.HangTimeout
	// passes, and then answers HTTP 504 GatewayTimeout.
	TimeoutRate float64
	// SpikeRate is the probability [0,1] that a call takes SpikeLatency on
	// top of its normal latency.
	SpikeRate    float64
	SpikeLatency time.Duration
	// ThrottleStorm makes every call answer HTTP 429 TooManyRequests with
	// Retry-After StormRetryAfter (default 1s), without taking quota.
	ThrottleStorm   bool
	StormRetryAfter time.Duration
	// Outage makes every call answer HTTP 503 ServiceUnavailable.
	Outage bool
}

func (f Faults) validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"ErrorRate", f.ErrorRate}, {"AmbiguousRate", f.AmbiguousRate}, {"TimeoutRate", f.TimeoutRate}, {"SpikeRate", f.SpikeRate}} {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			return fmt.Errorf("simcloud: Faults.%s must be in [0, 1], got %v", r.name, r.v)
		}
	}
	if f.ErrorRate+f.AmbiguousRate > 1 {
		return fmt.Errorf("simcloud: Faults.ErrorRate + Faults.AmbiguousRate must be <= 1, got %v", f.ErrorRate+f.AmbiguousRate)
	}
	if f.SpikeLatency < 0 {
		return fmt.Errorf("simcloud: Faults.SpikeLatency must be >= 0, got %v", f.SpikeLatency)
	}
	if f.StormRetryAfter < 0 {
		return fmt.Errorf("simcloud: Faults.StormRetryAfter must be >= 0, got %v", f.StormRetryAfter)
	}
	return nil
}

// withDefaults validates c and returns it with defaults applied.
func (c ServerConfig) withDefaults() (ServerConfig, error) {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return c, fmt.Errorf("simcloud: ServerConfig.Addr %q: %v", c.Addr, err)
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		return c, fmt.Errorf("simcloud: ServerConfig.Addr %q: host must be a loopback IP such as 127.0.0.1", c.Addr)
	}
	for _, q := range []struct {
		name  string
		qps   float64
		burst *int
	}{{"Read", c.ReadQPS, &c.ReadBurst}, {"Write", c.WriteQPS, &c.WriteBurst}} {
		if math.IsNaN(q.qps) || math.IsInf(q.qps, 0) || q.qps < 0 {
			return c, fmt.Errorf("simcloud: ServerConfig.%sQPS must be a finite number >= 0, got %v", q.name, q.qps)
		}
		if *q.burst < 0 {
			return c, fmt.Errorf("simcloud: ServerConfig.%sBurst must be >= 0, got %d", q.name, *q.burst)
		}
		if q.qps > 0 && *q.burst == 0 {
			*q.burst = max(1, int(math.Ceil(q.qps)))
		}
	}
	if c.BaseLatency < 0 {
		return c, fmt.Errorf("simcloud: ServerConfig.BaseLatency must be >= 0, got %v", c.BaseLatency)
	}
	if c.Jitter < 0 {
		return c, fmt.Errorf("simcloud: ServerConfig.Jitter must be >= 0, got %v", c.Jitter)
	}
	if c.MaxBatchSize < 0 {
		return c, fmt.Errorf("simcloud: ServerConfig.MaxBatchSize must be >= 0, got %d", c.MaxBatchSize)
	}
	if c.MaxBatchSize == 0 {
		c.MaxBatchSize = DefaultMaxBatchSize
	}
	if c.ListPageSize < 0 {
		return c, fmt.Errorf("simcloud: ServerConfig.ListPageSize must be >= 0, got %d", c.ListPageSize)
	}
	if c.ListPageSize == 0 {
		c.ListPageSize = DefaultListPageSize
	}
	if c.HangTimeout < 0 {
		return c, fmt.Errorf("simcloud: ServerConfig.HangTimeout must be >= 0, got %v", c.HangTimeout)
	}
	if c.HangTimeout == 0 {
		c.HangTimeout = DefaultHangTimeout
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if len(c.Zones) == 0 {
		c.Zones = DefaultZones
	}
	c.Zones = append([]string(nil), c.Zones...)
	for i, z := range c.Zones {
		if z == "" || strings.Contains(z, "/") {
			return c, fmt.Errorf("simcloud: ServerConfig.Zones[%d] %q must be non-empty and contain no \"/\"", i, z)
		}
	}
	if len(c.Clusters) == 0 {
		c.Clusters = []string{DefaultCluster}
	}
	c.Clusters = append([]string(nil), c.Clusters...)
	for i, name := range c.Clusters {
		if !validName(name) {
			return c, fmt.Errorf("simcloud: ServerConfig.Clusters[%d] %q must match [A-Za-z0-9._-]{1,253}", i, name)
		}
	}
	if err := c.Faults.validate(); err != nil {
		return c, err
	}
	return c, nil
}
