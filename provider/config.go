package provider

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/cache"
	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/metrics"
)

// Config is cloudgate's configuration (cloudgate.yaml). LoadConfig fills
// every field it does not set from DefaultConfig; README.md documents each
// default and why it was chosen. A Config built by hand should start from
// DefaultConfig too: New fills only the optional switches left nil (see
// Default), and Validate rejects the required numbers left 0.
type Config struct {
	// Upstream names the wrapped provider and its own configuration.
	Upstream UpstreamConfig `json:"upstream"`
	// Mode is "enforce" (the default: cloudgate caches, limits, batches
	// and breaks) or "shadow": every call goes to the upstream as without
	// cloudgate, and cloudgate only computes and exports what it would
	// have done (cloudgate_shadow_* metrics; shadow.go).
	Mode string `json:"mode,omitempty"`
	// ProviderName, when set, replaces the upstream's ProviderName(). Leave
	// it empty: the CCM writes "<ProviderName>://..." into node provider IDs
	// and compares it with existing ones, so changing it would orphan nodes.
	ProviderName string        `json:"providerName,omitempty"`
	Cache        CacheConfig   `json:"cache"`
	Limits       LimitsConfig  `json:"limits"`
	Breaker      BreakerConfig `json:"breaker"`
	// Methods overrides per-method policy, keyed by the Go method name of
	// the cloudprovider interfaces (e.g. InstanceMetadata, ListRoutes).
	Methods  map[string]MethodConfig `json:"methods,omitempty"`
	Batch    BatchConfig             `json:"batch"`
	Throttle ThrottleConfig          `json:"throttle"`
	// NotFoundGuard holds a single "instance does not exist" answer back
	// from the node lifecycle controller until a second one confirms it.
	NotFoundGuard NotFoundGuardConfig `json:"notFoundGuard"`

	// Metrics receives cloudgate's metrics; nil uses metrics.Default (which
	// the registered provider puts on the CCM's /metrics). Not read from YAML.
	Metrics *metrics.Metrics `json:"-"`
	// Clock is the time source of everything cloudgate times (caches,
	// buckets, breakers, batches, the fleet, timeouts); nil is the real
	// clock. Not read from YAML (tests inject a fake clock).
	Clock clock.WithTickerAndDelayedExecution `json:"-"`

	// upstreamConfig is the upstream's configuration, inline or read from
	// upstream.configFile by Resolve; never logged nor printed.
	upstreamConfig []byte
}

// UpstreamConfig names the provider cloudgate wraps. It must be registered in
// the same binary (cloudprovider.RegisterCloudProvider). Its configuration is
// given inline (Config) or as a file path (ConfigFile), not both. The
// upstream's configuration may hold credentials: cloudgate never logs it.
type UpstreamConfig struct {
	Name       string `json:"name"`
	Config     string `json:"config,omitempty"`
	ConfigFile string `json:"configFile,omitempty"`
}

// CacheConfig sets the caches' shared policy.
type CacheConfig struct {
	// Size bounds each method's cache (entries); least recently used go first.
	// Entries are allocated as they are stored, so a large bound costs
	// nothing until it is used. The default, 250,000, holds a 100,000-node
	// cluster with list prefetch, which stores each instance under its
	// provider ID and its node name (2 entries per node), with room for churn.
	Size int `json:"size"`
	// NegativeTTL is how long "instance not found" is remembered.
	NegativeTTL Duration `json:"negativeTTL"`
	// StaleIfError is how long past its TTL a positive cached answer may be
	// served while the family's circuit breaker is open: its age (since the
	// upstream gave it) is at most TTL+StaleIfError. Negative answers are
	// never served stale. 0 never serves stale reads.
	StaleIfError Duration `json:"staleIfError"`
}

// LimitsConfig holds the token bucket of each API family.
type LimitsConfig struct {
	Read  BucketConfig `json:"read"`
	Write BucketConfig `json:"write"`
	// Shared, when set, makes Read and Write the quotas of the whole fleet
	// of cloudgates (and tools) naming the same account, drawn from one
	// Redis-side budget (docs/fleet.md). Nil: this process's own buckets.
	Shared *fleet.Config `json:"shared,omitempty"`
}

// BucketConfig is one token bucket.
type BucketConfig struct {
	// QPS is the sustained rate in calls per second (> 0).
	QPS float64 `json:"qps"`
	// Burst is the bucket size (>= 1).
	Burst int `json:"burst"`
	// Adaptive cuts the rate when the cloud throttles (multiplicative
	// decrease, honouring Retry-After) and recovers it linearly. Default
	// (nil) true.
	Adaptive *bool `json:"adaptive,omitempty"`
	// WaitTimeout bounds the wait for a token: a caller still waiting after
	// it gets a retryable *api.RetryError (the service controller requeues)
	// instead of parking its worker; controllers pass contexts without
	// deadlines. 0: wait as long as the caller's context allows.
	WaitTimeout Duration `json:"waitTimeout"`
	// Recovery is how long an adaptive rate takes to grow back linearly
	// from 0 to qps once the cloud stops throttling (0: 30s), in 30 steps;
	// successive cuts are at least recovery/30 apart. As
	// limits.shared.recovery for a fleet.
	Recovery Duration `json:"recovery,omitzero"`
}

// BreakerConfig is the circuit breaker of each family.
type BreakerConfig struct {
	// FailureRatio opens the breaker when this share of calls in Interval
	// failed (0 < ratio <= 1) ...
	FailureRatio float64 `json:"failureRatio"`
	// ... and at least MinRequests calls were made in it.
	MinRequests uint32 `json:"minRequests"`
	// Interval is the closed-state counting window.
	Interval Duration `json:"interval"`
	// OpenTimeout is the longest the breaker stays open before probing:
	// it is open MinOpenTimeout first, twice as long after each failed
	// probe, at most OpenTimeout, and probes at once when a call of either
	// family shows the cloud answers.
	OpenTimeout Duration `json:"openTimeout"`
	// MinOpenTimeout is the first open interval (0: openTimeout/30).
	MinOpenTimeout Duration `json:"minOpenTimeout,omitempty"`
	// HalfOpenRequests probes must all succeed to close it again.
	HalfOpenRequests uint32 `json:"halfOpenRequests"`
	// WaitForProbe (default, nil, true): a read the open breaker rejects, with no stale answer to serve, waits for the
	// breaker's next probe — at most 2 × openTimeout — and is tried again
	// if the probe shows the cloud answering; it fails with the rejection
	// when a probe fails meanwhile. A provider's client retries with
	// backoff the same way; failing at once instead makes every
	// controller's per-item backoff grow through an outage and delays its
	// recovery. Writes never wait: one held while a newer write of the same
	// object goes first would land last and undo it. false: reads fail at
	// once too.
	WaitForProbe *bool `json:"waitForProbe,omitempty"`
}

// MethodConfig overrides one method's policy.
type MethodConfig struct {
	// TTL of the method's cached answers; only for read methods. 0 turns
	// caching off for the method: every call is sent (limited, breaker-guarded).
	TTL *Duration `json:"ttl,omitempty"`
	// QPS and Burst give the method a bucket of its own, chained with its
	// family's: a call takes a token from the method's bucket, then one
	// from the family's (this process's limits.<family>, or the fleet's
	// budget with limits.shared), so a method's qps caps that method
	// within its family's quota and never adds to it. 0: the family's
	// bucket alone.
	QPS   float64 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
}

// BatchConfig controls batched node lookups (used when the upstream's
// InstancesV2 implements BatchInstances) and list prefetch (InstanceLister).
type BatchConfig struct {
	// Enabled coalesces concurrent per-node lookups into batch calls.
	// Default (nil) true.
	Enabled *bool `json:"enabled,omitempty"`
	// MaxSize flushes a batch when it holds this many nodes (capped by the
	// upstream's MaxBatchSize).
	MaxSize int `json:"maxSize"`
	// MaxWait flushes a batch at the latest this long after its first node
	// arrived: a cap, not a delay for a lone lookup (see SendAtOnce).
	MaxWait Duration `json:"maxWait"`
	// SendAtOnce (default, nil, true) sends a lookup at once when no batch call
	// is in flight and the read bucket has a token; lookups arriving while
	// a call is in flight, or while the batch waits for its token,
	// accumulate and go together when it returns or the token comes (or at
	// maxSize, or maxWait). false: every batch waits for maxSize or maxWait
	// (the AWS provider's own batcher's behaviour); an opt-out kept for
	// comparison, not for a known need.
	SendAtOnce *bool `json:"sendAtOnce,omitempty"`
	// ListPrefetch refreshes the whole instance cache with paged list calls
	// every ListInterval, so steady-state per-node reads never reach the cloud.
	// On by default: it takes effect only when the upstream's InstancesV2
	// implements InstanceLister (aws-batch does); false turns it off.
	ListPrefetch bool `json:"listPrefetch"`
	// ListInterval between two list refreshes (0: half the InstanceMetadata TTL).
	ListInterval Duration `json:"listInterval,omitempty"`
}

// NotFoundGuardConfig is the not-found guard (instancesv2.go): a "does not
// exist" answer for an instance is returned as a retryable error (the node
// lifecycle controller keeps the Node) until a second upstream answer at
// least ConfirmAfter later says the same and the Node is older than
// GracePeriod. An instance the cloud describes as terminated passes at once.
type NotFoundGuardConfig struct {
	// Enabled turns the guard on (default, nil, true); false passes every
	// answer on.
	Enabled *bool `json:"enabled,omitempty"`
	// GracePeriod after a Node's creation during which "does not exist" is
	// never passed on (a new instance may not yet be visible to reads).
	GracePeriod Duration `json:"gracePeriod"`
	// ConfirmAfter is the least time between the first "does not exist" and
	// the answer that confirms it.
	ConfirmAfter Duration `json:"confirmAfter"`
}

// ThrottleConfig recognises the cloud's throttling answers.
type ThrottleConfig struct {
	// Patterns are extra regular expressions matched against error messages,
	// in addition to the built-in ones (429, RequestLimitExceeded,
	// Throttling, TooManyRequests, rateLimitExceeded, ...).
	Patterns []string `json:"patterns,omitempty"`
	// MaxRetryAfter caps the Retry-After cloudgate honours (one long answer
	// would otherwise pause a whole family).
	MaxRetryAfter Duration `json:"maxRetryAfter"`
}

// Duration is metav1.Duration, a time.Duration written as a Go duration
// string ("30s", "5m") in YAML, as in every Kubernetes config; the alias
// keeps the name callers use. A bad value is an error naming the field
// (LoadConfig).
type Duration = metav1.Duration

func dur(d time.Duration) Duration   { return Duration{Duration: d} }
func durp(d time.Duration) *Duration { return &Duration{Duration: d} }
func boolp(b bool) *bool             { return &b }

// DefaultConfig returns the defaults: safe for a large cluster (thousands of
// nodes) against a cloud with a modest quota. Upstream is left empty.
func DefaultConfig() *Config {
	return &Config{
		Mode:  ModeEnforce,
		Cache: CacheConfig{Size: 250000, NegativeTTL: dur(30 * time.Second), StaleIfError: dur(10 * time.Minute)},
		Limits: LimitsConfig{
			Read:  BucketConfig{QPS: 10, Burst: 20, Adaptive: boolp(true), WaitTimeout: dur(2 * time.Minute)},
			Write: BucketConfig{QPS: 5, Burst: 10, Adaptive: boolp(true), WaitTimeout: dur(2 * time.Minute)},
		},
		Breaker: BreakerConfig{
			FailureRatio: 0.5, MinRequests: 20, Interval: dur(time.Minute),
			OpenTimeout: dur(2 * time.Second), HalfOpenRequests: 3, WaitForProbe: boolp(true),
		},
		// listPrefetch on: behind an upstream that lists (aws-batch) it keeps
		// steady-state per-node reads off the cloud, and a figure quoted for
		// the default install must be the default's own.
		Batch:    BatchConfig{Enabled: boolp(true), MaxSize: 100, MaxWait: dur(100 * time.Millisecond), ListPrefetch: true},
		Throttle: ThrottleConfig{MaxRetryAfter: dur(5 * time.Minute)},
		// 20 s: longer than EC2's read-after-write inconsistency window
		// (seconds) and four node-monitor periods (5 s), short beside the
		// minutes a removed instance's Node may linger anyway.
		NotFoundGuard: NotFoundGuardConfig{Enabled: boolp(true), GracePeriod: dur(2 * time.Minute), ConfirmAfter: dur(20 * time.Second)},
	}
}

// Default fills the optional switches left nil with their defaults:
// limits.read.adaptive, limits.write.adaptive, breaker.waitForProbe,
// batch.enabled, batch.sendAtOnce and notFoundGuard.enabled all default to
// true, and mode to enforce. (DefaultConfig has them set; New applies
// Default to a copy of the Config it is given, so a Config built by hand
// means the same as the YAML that leaves them out.) Required numbers are
// not defaulted: Validate names those left 0.
func (c *Config) Default() {
	for _, p := range []**bool{&c.Limits.Read.Adaptive, &c.Limits.Write.Adaptive, &c.Breaker.WaitForProbe,
		&c.Batch.Enabled, &c.Batch.SendAtOnce, &c.NotFoundGuard.Enabled} {
		if *p == nil {
			*p = boolp(true)
		}
	}
	if c.Mode == "" {
		c.Mode = ModeEnforce
	}
}

// LoadConfig reads cloudgate.yaml (DecodeConfig), fills the optional
// switches (Default) and validates it. It does not fill in derived values
// nor check the upstream (Resolve does, for what runs): a caller may still
// change fields, such as a method's TTL that batch.listInterval follows.
func LoadConfig(r io.Reader) (*Config, error) {
	cfg, err := DecodeConfig(r)
	if err != nil {
		return nil, err
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// DecodeConfig reads cloudgate.yaml over DefaultConfig, and nothing more:
// errors name the offending field and what would fix it; unknown keys are
// errors. Resolve (or LoadConfig) checks the values.
func DecodeConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, errors.New("cloudgate config: no config given: pass --cloud-config=cloudgate.yaml naming at least upstream.name")
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("cloudgate config: reading: %w", err)
	}
	cfg := DefaultConfig()
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("cloudgate config: empty: set at least upstream.name")
	}
	if err := checkDurations(data); err != nil {
		return nil, err
	}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("cloudgate config: %s", cleanYAMLError(err))
	}
	return cfg, nil
}

// ResolveOptions says how a configuration will be run (Resolve).
type ResolveOptions struct {
	// BuildUpstream: the upstream is built from upstream.name and its
	// configuration (the CCM's registered factory; cloudgate-config), so
	// upstream.name is required and upstream.configFile is read now. New,
	// handed the upstream itself, leaves it false.
	BuildUpstream bool
	// Upstreams, when not nil, are the providers registered in the binary
	// that will run the configuration, and upstream.name must be one of
	// them. The CCM's factory leaves it nil: it runs under the provider
	// registry's lock and cannot ask the registry, and refuses an
	// unregistered name when it builds the upstream (buildUpstream), at
	// start-up.
	Upstreams []string
}

// Resolve returns the configuration cloudgate runs with, and is the one
// place it is decided: the optional switches defaulted (Default), every
// field checked (Validate, and the upstream as o says), and the value each
// zero field stands for filled in — batch.listInterval (half the
// InstanceMetadata TTL, or 1m when that is 0) and breaker.minOpenTimeout
// (openTimeout/30) — so that the configuration the CCM logs at start-up and
// cloudgate-config prints is the one that runs. c is not changed; resolving
// a resolved configuration gives it back unchanged.
func (c *Config) Resolve(o ResolveOptions) (*Config, error) {
	r := *c
	r.Default()
	err := r.Validate()
	var errs []string
	if err != nil {
		errs = append(errs, strings.TrimPrefix(err.Error(), "cloudgate config: "))
	}
	if o.BuildUpstream {
		if msg := r.resolveUpstream(o.Upstreams); msg != "" {
			errs = append(errs, msg)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("cloudgate config: %s", strings.Join(errs, "; "))
	}
	if r.Batch.ListInterval.Duration == 0 {
		// Half the TTL: a listed answer is refreshed before it expires, so
		// steady-state reads never miss. With InstanceMetadata uncached
		// there is no TTL to follow; a minute keeps the list cheap.
		r.Batch.ListInterval.Duration = r.ttl("InstanceMetadata") / 2
		if r.Batch.ListInterval.Duration <= 0 {
			r.Batch.ListInterval.Duration = time.Minute
		}
	}
	if r.Breaker.MinOpenTimeout.Duration == 0 {
		// As limiter.NewBreaker reads 0: short enough that a blip costs
		// little, doubled on each failed probe up to openTimeout.
		r.Breaker.MinOpenTimeout.Duration = max(r.Breaker.OpenTimeout.Duration/30, time.Nanosecond)
	}
	return &r, nil
}

// resolveUpstream checks upstream.name and reads upstream.configFile into
// c.upstreamConfig; it returns the problem, "" when there is none.
func (c *Config) resolveUpstream(registered []string) string {
	u := c.Upstream
	switch {
	case u.Name == "":
		return "upstream.name is required: name the provider to wrap (e.g. aws, gce, azure), registered in this binary"
	case u.Name == Name:
		return "" // Validate has said it
	case registered != nil && !slices.Contains(registered, u.Name):
		return fmt.Sprintf("upstream.name: provider %q is not registered in the CCM binary (it has %s): fix the name, or import the provider's package in the CCM's main (cloudgate-config: list that binary's providers with -upstreams)",
			u.Name, strings.Join(registered, ", "))
	}
	switch {
	case u.ConfigFile != "" && u.Config != "":
		// Validate has said it.
	case u.ConfigFile != "":
		b, err := os.ReadFile(u.ConfigFile)
		if err != nil {
			return fmt.Sprintf("upstream.configFile: %v: the CCM reads it at start-up; name a file it can read (the upstream provider's own config), or give the config inline in upstream.config", err)
		}
		c.upstreamConfig = b
	case u.Config != "":
		c.upstreamConfig = []byte(u.Config)
	}
	return ""
}

// durationTypes are the types of the duration fields: cloudgate's own, and
// limits.shared's (the fleet's, which knows nothing of Kubernetes).
var durationTypes = map[reflect.Type]bool{reflect.TypeFor[metav1.Duration](): true, reflect.TypeFor[fleet.Duration](): true}

// checkDurations finds the first duration field of a cloudgate.yaml whose
// value is not a Go duration string, and names it: metav1.Duration's own
// error names neither the field nor the format.
func checkDurations(data []byte) error {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil // not a map: UnmarshalStrict reports it
	}
	return walkDurations(reflect.TypeFor[Config](), doc, "")
}

func walkDurations(t reflect.Type, doc map[string]any, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		v, ok := doc[name]
		if name == "" || name == "-" || !ok || v == nil {
			continue
		}
		field := path + name
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case durationTypes[ft]:
			s, isString := v.(string)
			if !isString {
				return fmt.Errorf("cloudgate config: %s: want a duration string such as \"30s\" or \"5m\", got %v", field, v)
			}
			if _, err := time.ParseDuration(s); err != nil {
				return fmt.Errorf("cloudgate config: %s: want a duration string such as \"30s\" or \"5m\": %w", field, err)
			}
		case ft.Kind() == reflect.Struct:
			if m, ok := v.(map[string]any); ok {
				if err := walkDurations(ft, m, field+"."); err != nil {
					return err
				}
			}
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			m, _ := v.(map[string]any)
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if sub, ok := m[k].(map[string]any); ok {
					if err := walkDurations(ft.Elem(), sub, field+"."+k+"."); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// cleanYAMLError turns decoder errors into "field ...: ..." text.
func cleanYAMLError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "error unmarshaling JSON: while decoding JSON: ")
	msg = strings.Replace(msg, "json: unknown field", "unknown field", 1)
	if strings.Contains(msg, "unknown field") {
		msg += " (check the spelling; README.md lists every key)"
	}
	return msg
}

// Validate checks every field and names the first bad one. Optional
// switches left nil are read as their defaults (see Default).
func (c *Config) Validate() error {
	d := *c
	d.Default()
	c = &d
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if c.Upstream.Config != "" && c.Upstream.ConfigFile != "" {
		bad("upstream: set either config (inline) or configFile (a path), not both")
	}
	if c.Upstream.Name == Name {
		bad("upstream.name: cannot be %q itself; name the provider to wrap", Name)
	}
	switch c.Mode {
	case ModeEnforce:
	case ModeShadow:
		if c.Limits.Shared != nil {
			bad("mode: shadow does not take limits.shared (a shadow would hold a share of the fleet's quota it never uses); remove limits.shared or set mode: enforce")
		}
	default:
		bad("mode: %q is not a mode; want %q (the default) or %q (pass every call through and export what cloudgate would have done)", c.Mode, ModeEnforce, ModeShadow)
	}
	if c.Limits.Shared != nil {
		if err := c.Limits.Shared.Validate(); err != nil {
			bad("%v", err) // names limits.shared.<field> and the fix
		}
	}
	if err := (cache.Config[string, struct{}]{
		Size: c.Cache.Size, NegativeTTL: c.Cache.NegativeTTL.Duration, StaleIfError: c.Cache.StaleIfError.Duration,
		TTL: time.Hour, // each method's own TTL is checked under methods.*
	}).Validate(); err != nil {
		bad("cache.%v", err)
	}
	for _, name := range []string{familyRead, familyWrite} {
		b := c.Limits.Read
		if name == familyWrite {
			b = c.Limits.Write
		}
		if err := b.limiterConfig(c.Throttle.MaxRetryAfter.Duration).Validate(); err != nil {
			bad("limits.%s.%v", name, err)
		}
		if d := b.Recovery.Duration; d != 0 && (d < 30*time.Millisecond || d > time.Hour) {
			bad("limits.%s.recovery must be between 30ms and 1h (got %s; leave it out for 30s)", name, b.Recovery)
		}
		if b.WaitTimeout.Duration < 0 {
			bad("limits.%s.waitTimeout must be >= 0 (got %s; 0 waits as long as the caller's context allows)", name, b.WaitTimeout)
		}
	}
	if err := c.Breaker.limiterConfig(nil).Validate(); err != nil {
		bad("breaker.%v", err)
	}
	names := make([]string, 0, len(c.Methods))
	for n := range c.Methods {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		m := c.Methods[n]
		spec, ok := methodSpecs[n]
		if !ok {
			bad("methods.%s: unknown method; known methods: %s", n, strings.Join(methodNames(), ", "))
			continue
		}
		if m.TTL != nil {
			switch {
			case m.TTL.Duration < 0:
				bad("methods.%s.ttl must be >= 0 (got %s)", n, m.TTL)
			case spec.family == familyWrite:
				bad("methods.%s.ttl: %s is a write; writes are never cached", n, n)
			case spec.defaultTTL == 0:
				bad("methods.%s.ttl: %s is not cached (it answers without a cloud read)", n, n)
			}
		}
		if m.QPS != 0 || m.Burst != 0 { // a bucket of its own
			b := BucketConfig{QPS: m.QPS, Burst: m.Burst}
			if err := b.limiterConfig(c.Throttle.MaxRetryAfter.Duration).Validate(); err != nil {
				bad("methods.%s.%v", n, err)
			}
		}
	}
	if c.Batch.MaxSize < 1 {
		bad("batch.maxSize must be >= 1 (got %d)", c.Batch.MaxSize)
	}
	if c.Batch.MaxWait.Duration <= 0 {
		bad("batch.maxWait must be > 0 (got %s)", c.Batch.MaxWait)
	}
	if c.Batch.ListInterval.Duration < 0 {
		bad("batch.listInterval must be >= 0 (got %s)", c.Batch.ListInterval)
	}
	if c.NotFoundGuard.GracePeriod.Duration < 0 {
		bad("notFoundGuard.gracePeriod must be >= 0 (got %s)", c.NotFoundGuard.GracePeriod)
	}
	if c.NotFoundGuard.ConfirmAfter.Duration < 0 {
		bad("notFoundGuard.confirmAfter must be >= 0 (got %s; set notFoundGuard.enabled: false to turn the guard off)", c.NotFoundGuard.ConfirmAfter)
	}
	if c.Throttle.MaxRetryAfter.Duration < 0 {
		bad("throttle.maxRetryAfter must be >= 0 (got %s; 0 means 5m)", c.Throttle.MaxRetryAfter)
	}
	for i, p := range c.Throttle.Patterns {
		re, err := regexp.Compile(p)
		switch {
		case err != nil:
			bad("throttle.patterns[%d]: %q is not a Go regular expression: %v", i, p, err)
		case re.MatchString(""):
			// It matches every message: every error would be a throttle
			// and the breaker would never trip.
			bad("throttle.patterns[%d]: %q matches the empty string, so every error message; match the throttling message's own words", i, p)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("cloudgate config: %s", strings.Join(errs, "; "))
	}
	return nil
}

// limiterConfig is b as the limiter takes it.
func (b BucketConfig) limiterConfig(maxRetryAfter time.Duration) limiter.BucketConfig {
	out := limiter.BucketConfig{
		QPS: b.QPS, Burst: b.Burst, Adaptive: b.Adaptive != nil && *b.Adaptive,
		MaxRetryAfter: maxRetryAfter,
	}
	if d := b.Recovery.Duration; d > 0 {
		out.RecoveryQPSPerSecond = b.QPS / d.Seconds()
		out.RecoveryStep = d / 30
	}
	return out
}

// limiterConfig is br as the limiter takes it.
func (br BreakerConfig) limiterConfig(clk clock.WithTickerAndDelayedExecution) limiter.BreakerConfig {
	return limiter.BreakerConfig{
		FailureRatio:     br.FailureRatio,
		MinRequests:      br.MinRequests,
		Interval:         br.Interval.Duration,
		OpenTimeout:      br.OpenTimeout.Duration,
		MinOpenTimeout:   br.MinOpenTimeout.Duration,
		HalfOpenRequests: br.HalfOpenRequests,
		Clock:            clk,
	}
}

// TTLs returns every read method's effective TTL (0: not cached), the
// defaults overridden by methods.<name>.ttl.
func (c *Config) TTLs() map[string]time.Duration {
	ttls := DefaultTTLs()
	for m := range ttls {
		ttls[m] = c.ttl(m)
	}
	return ttls
}

// ttl returns a read method's effective TTL (0: not cached).
func (c *Config) ttl(method string) time.Duration {
	if m, ok := c.Methods[method]; ok && m.TTL != nil {
		return m.TTL.Duration
	}
	return methodSpecs[method].defaultTTL
}
