// Package cache is a bounded read-through cache for answers from a slow,
// quota-limited API: an LRU (github.com/hashicorp/golang-lru/v2) of entries
// that each carry a TTL, with negative entries (an error that is itself an
// answer, such as "instance not found"), bounded-stale reads for when the API
// is down, in-flight de-duplication of concurrent identical reads
// (golang.org/x/sync/singleflight), and invalidation by writes.
//
// The package knows nothing of Kubernetes or clouds: callers decide the key,
// the TTLs, which errors are answers, and how values are copied.
package cache

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// Observer receives cache events; the metrics package implements it. Methods
// must be cheap and safe for concurrent use.
type Observer interface {
	// Hit: a fresh positive entry answered a Get.
	Hit(cache string)
	// NegativeHit: a fresh negative entry answered a Get with its error.
	NegativeHit(cache string)
	// Miss: a Get found no fresh entry and joined or started a fetch.
	Miss(cache string)
	// Deduplicated: a Get was answered by a fetch another caller started.
	Deduplicated(cache string)
	// StaleServed: Stale answered with an entry past its TTL.
	StaleServed(cache string)
	// Evicted: an entry was dropped to make room (capacity, not expiry).
	Evicted(cache string)
}

type nopObserver struct{}

func (nopObserver) Hit(string)          {}
func (nopObserver) NegativeHit(string)  {}
func (nopObserver) Miss(string)         {}
func (nopObserver) Deduplicated(string) {}
func (nopObserver) StaleServed(string)  {}
func (nopObserver) Evicted(string)      {}

// Config configures a Cache. Zero values are documented per field.
type Config[K comparable, V any] struct {
	// Name identifies the cache in observer events and errors.
	Name string
	// Size is the maximum number of entries (>= 1); the least recently used
	// entry is evicted to make room.
	Size int
	// TTL is how long a positive answer is fresh (> 0).
	TTL time.Duration
	// NegativeTTL is how long a negative answer (see IsNegative) is fresh.
	// 0 disables negative caching.
	NegativeTTL time.Duration
	// MaxStale is how long past its TTL a positive entry is kept so that
	// Stale can serve it while the upstream is failing. 0 keeps nothing past
	// TTL. Stale's maxAge is bounded by TTL+MaxStale.
	MaxStale time.Duration
	// IsNegative reports whether a fetch error is an answer to cache (e.g.
	// "instance not found"). The error value itself is cached and returned
	// unchanged, so callers may compare it with ==. nil: no error is cached.
	IsNegative func(error) bool
	// NegativeValue reports whether a successful answer says "does not
	// exist" (e.g. InstanceExists == false). Such a value is cached like a
	// negative answer: for NegativeTTL (not at all when it is 0), and never
	// served by Stale. nil: no value is negative.
	NegativeValue func(V) bool
	// ShortLived reports keys whose answers are held only for
	// min(TTL, NegativeTTL) and never served by Stale: keys that may come to
	// name something else (a node name reused by a re-created instance).
	// nil: none.
	ShortLived func(K) bool
	// Clone copies a value. It is applied when a value is stored and to every
	// value handed to a caller, so neither the upstream nor any caller can
	// corrupt what others see. nil means V needs no copy (a value type, or
	// documented immutable).
	Clone func(V) V
	// KeyString renders a key for in-flight de-duplication; two keys that are
	// not == must render differently. nil uses fmt's %#v, which is
	// injective for strings and structs of strings.
	KeyString func(K) string
	// Clock is the time source; nil is the real clock.
	Clock clock.PassiveClock
	// Observer receives events; nil discards them.
	Observer Observer
}

type entry[V any] struct {
	value    V
	err      error // non-nil: a negative entry
	negative bool  // err != nil, or a NegativeValue: never served stale
	stored   time.Time
	fresh    time.Time // fresh until
	keep     time.Time // retained (for Stale) until
}

// Cache is a bounded LRU+TTL read-through cache, safe for concurrent use.
type Cache[K comparable, V any] struct {
	cfg     Config[K, V]
	flights singleflight.Group
	clock   clock.PassiveClock
	obs     Observer

	// mu guards the LRU and the epoch together (golang-lru's own pattern: a
	// lock around simplelru), so an invalidation cannot land between a
	// fetch's epoch check and its store.
	mu      sync.Mutex
	entries *simplelru.LRU[K, *entry[V]]
	// epoch counts invalidations: a fetch that started before an
	// invalidation must not store its (possibly pre-write) answer, and a Get
	// that starts after one must not join its flight.
	epoch uint64
}

// flightResult is what a flight hands its callers.
type flightResult[V any] struct {
	value V
	err   error
	// leaderGone: the caller that ran the fetch had its context end, so
	// its error is not the upstream's answer.
	leaderGone bool
}

// New returns an empty cache, or an error naming the invalid field.
func New[K comparable, V any](cfg Config[K, V]) (*Cache[K, V], error) {
	switch {
	case cfg.Size < 1:
		return nil, fmt.Errorf("cache %q: size must be >= 1 (got %d)", cfg.Name, cfg.Size)
	case cfg.TTL <= 0:
		return nil, fmt.Errorf("cache %q: ttl must be > 0 (got %s)", cfg.Name, cfg.TTL)
	case cfg.NegativeTTL < 0:
		return nil, fmt.Errorf("cache %q: negativeTTL must be >= 0 (got %s)", cfg.Name, cfg.NegativeTTL)
	case cfg.MaxStale < 0:
		return nil, fmt.Errorf("cache %q: maxStale must be >= 0 (got %s)", cfg.Name, cfg.MaxStale)
	}
	entries, err := simplelru.NewLRU[K, *entry[V]](cfg.Size, nil)
	if err != nil {
		return nil, fmt.Errorf("cache %q: %w", cfg.Name, err)
	}
	c := &Cache[K, V]{cfg: cfg, entries: entries, clock: cfg.Clock, obs: cfg.Observer}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.obs == nil {
		c.obs = nopObserver{}
	}
	if c.cfg.KeyString == nil {
		c.cfg.KeyString = func(k K) string { return fmt.Sprintf("%#v", k) }
	}
	return c, nil
}

// Name returns the configured name.
func (c *Cache[K, V]) Name() string { return c.cfg.Name }

// Get returns the fresh cached answer for key, or calls fetch to get one.
// Concurrent Gets of the same key share one fetch, unless an Invalidate
// returned between their starts: a Get that starts after Invalidate never
// joins a fetch that started before it. fetch runs with the context of the
// caller that started it; if that caller's context ends, the remaining
// callers start a new fetch rather than inherit an error that is not
// theirs; any other error, context-type or not, is the answer for all of
// them. Get returns promptly with ctx's error when ctx ends.
//
// A successful answer is stored for TTL (NegativeTTL for a NegativeValue or
// a ShortLived key); an error for which IsNegative is true is stored for
// NegativeTTL and returned as the same value; any other error is returned
// and not stored. Errors are returned exactly as fetch returned them.
func (c *Cache[K, V]) Get(ctx context.Context, key K, fetch func(context.Context) (V, error)) (V, error) {
	if v, err, ok := c.Fresh(key); ok {
		return v, err
	}
	c.obs.Miss(c.cfg.Name)
	keyString := c.cfg.KeyString(key)
	for {
		if err := ctx.Err(); err != nil {
			var zero V
			return zero, err
		}
		c.mu.Lock()
		epoch := c.epoch
		c.mu.Unlock()
		led := false
		results := c.flights.DoChan(keyString+"\x00"+strconv.FormatUint(epoch, 10), func() (any, error) {
			led = true
			// A flight that just finished may have stored a fresh answer.
			c.mu.Lock()
			e, ok := c.lookupLocked(key, c.clock.Now())
			c.mu.Unlock()
			if ok {
				return flightResult[V]{value: e.value, err: e.err}, nil
			}
			v, err := fetch(ctx)
			c.store(key, epoch, v, err)
			return flightResult[V]{value: v, err: err, leaderGone: err != nil && ctx.Err() != nil}, nil
		})
		select {
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		case r := <-results:
			fr, _ := r.Val.(flightResult[V])
			if !led {
				c.obs.Deduplicated(c.cfg.Name)
				if fr.leaderGone {
					continue // the leader gave up; our context is still live
				}
			}
			return c.clone(fr.value), fr.err
		}
	}
}

// Fresh answers like Get when key has a fresh entry, and counts the hit;
// ok is false (nothing counted) when Get would have to fetch. It lets a
// caller skip building its fetch function on the hot path.
func (c *Cache[K, V]) Fresh(key K) (value V, err error, ok bool) {
	e, ok := c.lookup(key, c.clock.Now())
	if !ok {
		return value, nil, false
	}
	if e.negative {
		c.obs.NegativeHit(c.cfg.Name)
		return c.clone(e.value), e.err, true
	}
	if e.err != nil {
		c.obs.NegativeHit(c.cfg.Name)
		return value, e.err, true
	}
	c.obs.Hit(c.cfg.Name)
	return c.clone(e.value), nil, true
}

// Peek returns the fresh entry for key without fetching: its value, or its
// error for a negative entry. ok is false when there is no fresh entry.
// Peek does not count as a hit or miss.
func (c *Cache[K, V]) Peek(key K) (value V, err error, ok bool) {
	e, ok := c.lookup(key, c.clock.Now())
	if !ok {
		return value, nil, false
	}
	if e.err != nil {
		return value, e.err, true
	}
	return c.clone(e.value), nil, true
}

// Stale returns the positive entry for key if it was stored at most maxAge
// ago, fresh or not (bounded by TTL+MaxStale, how long entries are kept).
// Negative entries — errors, NegativeValues — and ShortLived keys are never
// served stale: a stale "does not exist" could make a caller delete
// something that exists.
func (c *Cache[K, V]) Stale(key K, maxAge time.Duration) (V, bool) {
	var zero V
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.entries.Peek(key)
	c.mu.Unlock()
	if !ok || e.negative {
		return zero, false
	}
	if now.Sub(e.stored) > maxAge || !now.Before(e.keep) {
		return zero, false
	}
	if !now.Before(e.fresh) {
		c.obs.StaleServed(c.cfg.Name)
	}
	return c.clone(e.value), true
}

// Put stores a fresh positive answer for key, as if a fetch had returned it
// (used to fill the cache from batch and list calls). A NegativeValue is
// stored as a negative answer.
func (c *Cache[K, V]) Put(key K, value V) {
	c.mu.Lock()
	evicted := c.addLocked(key, c.newEntry(key, c.clone(value), nil, c.clock.Now()))
	c.mu.Unlock()
	c.evicted(evicted)
}

// PutNegative stores a negative answer for key (if negative caching is on).
func (c *Cache[K, V]) PutNegative(key K, err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	evicted := c.addLocked(key, c.newEntry(key, *new(V), err, c.clock.Now()))
	c.mu.Unlock()
	c.evicted(evicted)
}

// Invalidate drops key's entry, keeps any fetch already in flight from
// storing an answer it may have read before the change that caused this,
// and makes later Gets start a fetch of their own.
func (c *Cache[K, V]) Invalidate(key K) {
	c.mu.Lock()
	c.epoch++
	c.entries.Remove(key)
	c.mu.Unlock()
}

// Has reports whether key has an entry, fresh or kept for Stale. It does
// not count as a hit or miss, nor change the entry's recency.
func (c *Cache[K, V]) Has(key K) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries.Contains(key)
}

// Len returns the number of entries held, fresh or kept for Stale.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries.Len()
}

func (c *Cache[K, V]) lookup(key K, now time.Time) (*entry[V], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(key, now)
}

// lookupLocked returns key's entry if it is fresh at now, and drops it if
// it is past the time it is kept.
func (c *Cache[K, V]) lookupLocked(key K, now time.Time) (*entry[V], bool) {
	e, ok := c.entries.Get(key)
	if !ok {
		return nil, false
	}
	if now.Before(e.fresh) {
		return e, true
	}
	if !now.Before(e.keep) {
		c.entries.Remove(key)
	}
	return nil, false
}

// store adds a fetch's answer unless an invalidation happened since the
// fetch started (epoch), checked under the same lock as the add.
func (c *Cache[K, V]) store(key K, epoch uint64, v V, err error) {
	if err != nil && (c.cfg.IsNegative == nil || !c.cfg.IsNegative(err)) {
		return
	}
	if err == nil {
		v = c.clone(v)
	} else {
		v = *new(V)
	}
	now := c.clock.Now()
	c.mu.Lock()
	evicted := false
	if c.epoch == epoch {
		evicted = c.addLocked(key, c.newEntry(key, v, err, now))
	}
	c.mu.Unlock()
	c.evicted(evicted)
}

// newEntry returns the entry for an answer, or nil when it is not to be
// cached at all (a negative answer with NegativeTTL 0).
func (c *Cache[K, V]) newEntry(key K, v V, err error, now time.Time) *entry[V] {
	e := &entry[V]{value: v, err: err, stored: now}
	switch {
	case err != nil || (c.cfg.NegativeValue != nil && c.cfg.NegativeValue(v)):
		e.negative = true
		e.fresh = now.Add(c.cfg.NegativeTTL)
		e.keep = e.fresh
		if c.cfg.NegativeTTL <= 0 {
			return nil
		}
	case c.cfg.ShortLived != nil && c.cfg.ShortLived(key):
		ttl := min(c.cfg.TTL, c.cfg.NegativeTTL)
		if ttl <= 0 {
			return nil
		}
		e.fresh = now.Add(ttl)
		e.keep = e.fresh
	default:
		e.fresh = now.Add(c.cfg.TTL)
		e.keep = e.fresh.Add(c.cfg.MaxStale)
	}
	return e
}

// addLocked adds e (nil: nothing to cache, and key's old entry is dropped)
// and reports whether another entry was evicted to make room.
func (c *Cache[K, V]) addLocked(key K, e *entry[V]) bool {
	if e == nil {
		c.entries.Remove(key)
		return false
	}
	return c.entries.Add(key, e)
}

func (c *Cache[K, V]) evicted(evicted bool) {
	if evicted {
		c.obs.Evicted(c.cfg.Name)
	}
}

func (c *Cache[K, V]) clone(v V) V {
	if c.cfg.Clone == nil {
		return v
	}
	return c.cfg.Clone(v)
}
