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
	"hash/maphash"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// Observer receives one cache's events (Config.Observer: one observer per
// cache, as workqueue's MetricsProvider hands out one metric per queue).
// Methods must be cheap and safe for concurrent use.
type Observer interface {
	// Hit: a fresh positive entry answered a Get or Fresh.
	Hit()
	// NegativeHit: a fresh negative entry answered a Get or Fresh.
	NegativeHit()
	// Miss: a Get found no fresh entry and joined or started a fetch.
	Miss()
	// Deduplicated: a Get was answered by a fetch another caller started.
	Deduplicated()
	// StaleServed: Stale answered with an entry past its TTL.
	StaleServed()
	// Evicted: an entry was dropped to make room (capacity, not expiry).
	Evicted()
}

type nopObserver struct{}

func (nopObserver) Hit()          {}
func (nopObserver) NegativeHit()  {}
func (nopObserver) Miss()         {}
func (nopObserver) Deduplicated() {}
func (nopObserver) StaleServed()  {}
func (nopObserver) Evicted()      {}

// Config configures a Cache. Zero values are documented per field.
type Config[K comparable, V any] struct {
	// Name identifies the cache in errors.
	Name string
	// Size is the maximum number of entries (>= 1); the least recently used
	// entry is evicted to make room.
	Size int
	// TTL is how long a positive answer is fresh (> 0).
	TTL time.Duration
	// NegativeTTL is how long a negative answer (see IsNegative) is fresh.
	// 0 disables negative caching.
	NegativeTTL time.Duration
	// StaleIfError (as HTTP's stale-if-error) is how long past its TTL a
	// positive entry is kept so that Stale can serve it while the upstream
	// is failing. 0 keeps nothing past TTL. Stale's maxAge is bounded by
	// TTL+StaleIfError.
	StaleIfError time.Duration
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
	// Clone copies a value. It is applied when a value is stored and to
	// every value handed to a caller, so neither the upstream nor any
	// caller can corrupt what others see. nil means V needs no copy (a
	// value type, or documented immutable).
	Clone func(V) V
	// KeyString renders a key for in-flight de-duplication; two keys that are
	// not == must render differently. nil uses fmt's %#v, which is
	// injective for strings and structs of strings.
	KeyString func(K) string
	// Hash spreads keys over the cache's invalidation epoch slots (see
	// Cache); keys that are == must hash alike. nil uses
	// hash/maphash.Comparable.
	Hash func(maphash.Seed, K) uint64
	// Clock is the time source; nil is the real clock. It is the one
	// clock type cloudgate's packages take (k8s.io/utils/clock's real or
	// fake clock), so one value drives a whole gate.
	Clock clock.WithTickerAndDelayedExecution
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

// Cache is a bounded LRU+TTL read-through cache, safe for concurrent use:
// one simplelru behind one mutex, as golang-lru's own LRU. (A CCM makes at
// most a few hundred reads a second; a hit is a lock, a map lookup and a
// copy.)
type Cache[K comparable, V any] struct {
	cfg     Config[K, V]
	flights singleflight.Group
	clock   clock.WithTickerAndDelayedExecution
	obs     Observer
	seed    maphash.Seed
	mask    uint64

	// mu guards the LRU and the epochs together, so an invalidation cannot
	// land between a fetch's epoch check and its store.
	mu      sync.Mutex
	entries *simplelru.LRU[K, *entry[V]]
	// epochs count the invalidations of the keys hashing to each slot (one
	// slot for a cache of fewer than 256 entries, up to 16 for larger ones,
	// so that a write to one key does not discard fills of all others): a
	// fetch that started before an invalidation must not store its
	// (possibly pre-write) answer, and a Get that starts after one must not
	// join its flight.
	epochs []epoch
	// invalidations counts Invalidate calls (see Mark).
	invalidations uint64
}

// epoch is one slot's invalidation count, and the cache's invalidations
// count at the slot's latest Invalidate (see Mark, PutSince).
type epoch struct {
	n, invalidated uint64
}

// maxEpochs bounds the epoch slots; minSlotSize keeps small caches at one.
const (
	maxEpochs   = 16
	minSlotSize = 128
)

// flightResult is what a flight hands its callers.
type flightResult[V any] struct {
	value V
	err   error
	// leaderGone: the caller that ran the fetch had its context end, so
	// its error is not the upstream's answer.
	leaderGone bool
	// stored: the flight found the answer a flight that just finished
	// stored, so its caller was answered by a fetch another caller started.
	stored bool
}

// Validate reports the first invalid field of c, by its name in
// lowerCamelCase (as a YAML path's last element), e.g. "size must be >= 1
// (got 0)".
func (c Config[K, V]) Validate() error {
	switch {
	case c.Size < 1:
		return fmt.Errorf("size must be >= 1 (got %d)", c.Size)
	case c.TTL <= 0:
		return fmt.Errorf("ttl must be > 0 (got %s)", c.TTL)
	case c.NegativeTTL < 0:
		return fmt.Errorf("negativeTTL must be >= 0 (got %s)", c.NegativeTTL)
	case c.StaleIfError < 0:
		return fmt.Errorf("staleIfError must be >= 0 (got %s)", c.StaleIfError)
	}
	return nil
}

// New returns an empty cache, or an error wrapping Config.Validate's
// naming the cache, e.g. `cache "InstanceMetadata": size must be >= 1 (got 0)`.
func New[K comparable, V any](cfg Config[K, V]) (*Cache[K, V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cache %q: %w", cfg.Name, err)
	}
	n := 1
	for n < maxEpochs && cfg.Size/(2*n) >= minSlotSize {
		n *= 2
	}
	entries, err := simplelru.NewLRU[K, *entry[V]](cfg.Size, nil)
	if err != nil {
		return nil, fmt.Errorf("cache %q: %w", cfg.Name, err)
	}
	c := &Cache[K, V]{cfg: cfg, clock: cfg.Clock, obs: cfg.Observer, seed: maphash.MakeSeed(),
		entries: entries, epochs: make([]epoch, n), mask: uint64(n - 1)}
	if c.cfg.Hash == nil {
		c.cfg.Hash = maphash.Comparable[K]
	}
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
	c.obs.Miss()
	keyString := c.cfg.KeyString(key)
	slot := c.slot(key)
	for {
		if err := ctx.Err(); err != nil {
			var zero V
			return zero, err
		}
		c.mu.Lock()
		epoch := c.epochs[slot].n
		c.mu.Unlock()
		led := false
		results := c.flights.DoChan(keyString+"\x00"+strconv.FormatUint(epoch, 10), func() (any, error) {
			led = true
			// A flight that just finished may have stored a fresh answer.
			e, ok := c.lookup(key, c.now())
			if ok {
				return flightResult[V]{value: e.value, err: e.err, stored: true}, nil
			}
			v, err := fetch(ctx)
			// The flight's callers get copies of the stored copy, never
			// the fetched value itself (the upstream's, or another
			// caller's).
			v = c.store(slot, key, epoch, v, err)
			return flightResult[V]{value: v, err: err, leaderGone: err != nil && ctx.Err() != nil}, nil
		})
		select {
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		case r := <-results:
			fr, _ := r.Val.(flightResult[V])
			if !led || fr.stored {
				c.obs.Deduplicated()
			}
			if !led {
				if fr.leaderGone {
					continue // the leader gave up; our context is still live
				}
			}
			return c.out(fr.value), fr.err
		}
	}
}

// Fresh answers like Get when key has a fresh entry, and counts the hit;
// ok is false (nothing counted) when Get would have to fetch. It lets a
// caller skip building its fetch function on the hot path.
func (c *Cache[K, V]) Fresh(key K) (value V, err error, ok bool) {
	e, ok := c.lookup(key, c.now())
	if !ok {
		return value, nil, false
	}
	if e.negative {
		c.obs.NegativeHit()
		return c.out(e.value), e.err, true
	}
	if e.err != nil {
		c.obs.NegativeHit()
		return value, e.err, true
	}
	c.obs.Hit()
	return c.out(e.value), nil, true
}

// Holds reports whether key has a fresh entry (positive or negative),
// without counting a hit or a miss: for a caller deciding whether to ask
// ahead of a lookup, not answering one.
func (c *Cache[K, V]) Holds(key K) bool {
	_, ok := c.lookup(key, c.now())
	return ok
}

// Stale returns the positive entry for key if it was stored at most maxAge
// ago, fresh or not (bounded by TTL+StaleIfError, how long entries are kept).
// Negative entries — errors, NegativeValues — and ShortLived keys are never
// served stale: a stale "does not exist" could make a caller delete
// something that exists.
func (c *Cache[K, V]) Stale(key K, maxAge time.Duration) (V, bool) {
	var zero V
	now := c.now()
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
		c.obs.StaleServed()
	}
	return c.out(e.value), true
}

// Put stores a fresh positive answer for key, as if a fetch had returned it
// (used to fill the cache from batch and list calls). A NegativeValue is
// stored as a negative answer.
func (c *Cache[K, V]) Put(key K, value V) {
	e := c.newEntry(key, c.clone(value), nil, c.now())
	c.mu.Lock()
	evicted := c.addLocked(key, e)
	c.mu.Unlock()
	c.evicted(evicted)
}

// Mark is a moment in a cache's invalidations (see Cache.Mark).
type Mark struct{ invalidations uint64 }

// Mark returns the moment now: an answer read after it may be stored with
// PutSince, which stores nothing if an Invalidate of its key (or of a key
// sharing its epoch slot, see Cache) returned since — as Get's fetch stores nothing then.
// A caller that fills the cache from a call answering many keys (a batch, a
// list page) takes the Mark before sending the call.
func (c *Cache[K, V]) Mark() Mark {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Mark{c.invalidations}
}

// PutSince is Put for an answer read after m: it stores nothing when key
// may have been invalidated since m, so an answer read before the change
// behind an invalidation never outlives it.
func (c *Cache[K, V]) PutSince(key K, value V, m Mark) {
	c.putSince(key, c.newEntry(key, c.clone(value), nil, c.now()), m)
}

// PutSinceFor is PutSince for an answer that is fresh for at most maxFresh
// from now (when that is shorter than its TTL; kept for Stale as much less
// long): a caller that replaces its answers on a schedule of its own (a list
// refresh) bounds their age by it. maxFresh <= 0 is PutSince.
func (c *Cache[K, V]) PutSinceFor(key K, value V, m Mark, maxFresh time.Duration) {
	c.PutSinceForAt(key, value, m, maxFresh, time.Time{})
}

// PutSinceForAt is PutSinceFor for an answer read at `at` and stored only
// now (zero: now): its TTL and maxFresh count from `at`, as if it had been
// stored then, and it does not replace an entry stored after `at`. A caller
// that holds an answer back until it knows more (a list's last page) does not
// serve it any older than one stored when it came.
func (c *Cache[K, V]) PutSinceForAt(key K, value V, m Mark, maxFresh time.Duration, at time.Time) {
	if at.IsZero() {
		at = c.now()
	}
	e := c.newEntry(key, c.clone(value), nil, at)
	if e != nil && maxFresh > 0 {
		if cut := at.Add(maxFresh); cut.Before(e.fresh) {
			e.keep = e.keep.Add(-e.fresh.Sub(cut))
			e.fresh = cut
		}
	}
	c.putSince(key, e, m)
}

// PutNegativeSince is PutNegative for an answer read after m (see
// PutSince).
func (c *Cache[K, V]) PutNegativeSince(key K, err error, m Mark) {
	c.PutNegativeSinceAt(key, err, m, time.Time{})
}

// PutNegativeSinceAt is PutNegativeSince for an answer read at `at` (see
// PutSinceForAt).
func (c *Cache[K, V]) PutNegativeSinceAt(key K, err error, m Mark, at time.Time) {
	if err == nil {
		return
	}
	if at.IsZero() {
		at = c.now()
	}
	c.putSince(key, c.newEntry(key, *new(V), err, at), m)
}

func (c *Cache[K, V]) putSince(key K, e *entry[V], m Mark) {
	c.mu.Lock()
	evicted := false
	if c.epochs[c.slot(key)].invalidated <= m.invalidations {
		if old, ok := c.entries.Peek(key); !ok || e == nil || !old.stored.After(e.stored) {
			evicted = c.addLocked(key, e)
		}
	}
	c.mu.Unlock()
	c.evicted(evicted)
}

// PutNegative stores a negative answer for key (if negative caching is on).
func (c *Cache[K, V]) PutNegative(key K, err error) {
	if err == nil {
		return
	}
	e := c.newEntry(key, *new(V), err, c.now())
	c.mu.Lock()
	evicted := c.addLocked(key, e)
	c.mu.Unlock()
	c.evicted(evicted)
}

// Invalidate drops key's entry, keeps any fetch already in flight from
// storing an answer it may have read before the change that caused this,
// and makes later Gets start a fetch of their own.
func (c *Cache[K, V]) Invalidate(key K) {
	c.mu.Lock()
	c.invalidations++
	ep := &c.epochs[c.slot(key)]
	ep.n++
	ep.invalidated = c.invalidations
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

// now reads the cache's clock: one read per Get, Fresh, Stale or Put.
func (c *Cache[K, V]) now() time.Time { return c.clock.Now() }

// slot returns the index of key's epoch slot.
func (c *Cache[K, V]) slot(key K) int {
	if c.mask == 0 {
		return 0
	}
	return int(c.cfg.Hash(c.seed, key) & c.mask)
}

// lookup returns key's entry if it is fresh at now, moving it to the front
// of the LRU, and drops it if it is past the time it is kept.
func (c *Cache[K, V]) lookup(key K, now time.Time) (*entry[V], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
// fetch started (epoch), checked under the same lock as the add, and
// returns the value for the fetch's callers: the stored copy (a copy even
// when nothing is stored), or v as the fetch returned it with an error.
func (c *Cache[K, V]) store(slot int, key K, epoch uint64, v V, err error) V {
	if err != nil && (c.cfg.IsNegative == nil || !c.cfg.IsNegative(err)) {
		return v
	}
	out := v // an error's value goes back as the fetch returned it
	if err == nil {
		v = c.clone(v)
		out = v
	} else {
		v = *new(V)
	}
	e := c.newEntry(key, v, err, c.now())
	c.mu.Lock()
	evicted := false
	if c.epochs[slot].n == epoch {
		evicted = c.addLocked(key, e)
	}
	c.mu.Unlock()
	c.evicted(evicted)
	return out
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
		e.keep = e.fresh.Add(c.cfg.StaleIfError)
	}
	return e
}

// addLocked adds e for key (nil: nothing to cache, and key's old entry is
// dropped), and reports whether another entry was evicted to make room.
// The caller holds c.mu.
func (c *Cache[K, V]) addLocked(key K, e *entry[V]) bool {
	if e == nil {
		c.entries.Remove(key)
		return false
	}
	return c.entries.Add(key, e)
}

func (c *Cache[K, V]) evicted(evicted bool) {
	if evicted {
		c.obs.Evicted()
	}
}

// out is a value as handed to a caller: a copy of its own.
func (c *Cache[K, V]) out(v V) V { return c.clone(v) }

func (c *Cache[K, V]) clone(v V) V {
	if c.cfg.Clone == nil {
		return v
	}
	return c.cfg.Clone(v)
}
