package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Options are the settings that are not in cloudgate.yaml.
type Options struct {
	// MemberID names this member in Redis; default a random "m-…" id. Two
	// live members must not share one.
	MemberID string
	// Heartbeat overrides Config.Heartbeat (limits.shared.heartbeat) when
	// set.
	Heartbeat time.Duration
	// MemberTTL is how long a member counts as live after its last
	// heartbeat; afterwards it has fallen and the others hold its share.
	// Default 3 × Heartbeat.
	MemberTTL time.Duration
	// ForgetAfter overrides Config.ForgetAfter (limits.shared.forgetAfter)
	// when set: how long a fallen member stays registered (its share held)
	// before it is deregistered; default DefaultForgetAfterHeartbeats ×
	// Heartbeat (10 min at 1s). A member that stops without Close holds its
	// share that long, and a member cut from Redis serves its claim for
	// ForgetAfter − MemberTTL after it sent its last answered heartbeat,
	// then its floor (failureMode open) or nothing (closed) until Redis
	// answers again (see Fleet.awayLimit). It must exceed MemberTTL.
	ForgetAfter time.Duration
	// Observer receives events; nil discards them.
	Observer Observer
	// Logf writes the fallback and rejoin log lines; nil means klog. The
	// lines never hold credentials.
	Logf func(format string, args ...any)
	// Clock is the time source of the heartbeat, the fallback timings and
	// the waits; nil is the real clock. (Redis's scripts read Redis's own
	// clock.)
	Clock clock.WithTickerAndDelayedExecution
}

// Fleet is this member's connection to the fleet of one account: the Redis
// client, the membership heartbeat and the fallback state. Create one per
// account with New, then one Limiter per API family.
type Fleet struct {
	cfg     Config
	opts    Options
	clock   clock.WithTickerAndDelayedExecution
	obs     Observer
	client  redis.UniversalClient
	prefix  string // key prefix, with the account as hash tag
	timeout time.Duration

	transition sync.Mutex // serialises fallback transitions

	mu          sync.Mutex
	limiters    []*Limiter
	closed      bool
	fallback    bool
	known       bool    // the membership has been read at least once
	members     int     // registered members at the last heartbeat (live and fallen)
	fallen      int     // of which fallen
	held        float64 // the fallen members' share of the quota, held from the budget
	totalWeight float64 // the registered members' weights
	claim       float64 // this member's claim recorded in Redis at the last heartbeat: its share in fallback
	// floor is what this member serves once away in failureMode open: the
	// smaller of its claim and its fair share (weight / Σ registered
	// weights) at the last heartbeat, never 0.
	floor    float64
	failures int // consecutive failed Redis calls
	// lastOK is when this member sent the last heartbeat whose answer
	// arrived: Redis recorded that heartbeat no earlier, so it forgets the
	// member (and frees its claim) no earlier than lastOK + ForgetAfter.
	lastOK time.Time
	// away: cut from Redis for awayLimit, this member no longer serves its
	// claim (it may be freed by now): its floor in failureMode open,
	// nothing in closed.
	away bool
	// stopWarned: its heartbeats fail while its admissions still reach
	// Redis, and the stop that comes if they fail too has been reported.
	stopWarned bool

	stop chan struct{}
	done chan struct{}
}

// New connects this member to the fleet of cfg.Account. It validates cfg,
// reads the password file, and makes one heartbeat (bounded by RedisTimeout):
// when Redis is unreachable it still returns a working Fleet, in fallback,
// which rejoins when Redis answers. Errors name the YAML field; none holds
// the password.
func New(cfg Config, opts Options) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = cfg.Heartbeat.Duration
	}
	if opts.ForgetAfter <= 0 {
		opts.ForgetAfter = cfg.ForgetAfter.Duration
	}
	if opts.ForgetAfter <= 0 {
		opts.ForgetAfter = DefaultForgetAfterHeartbeats * opts.Heartbeat
	}
	if opts.MemberTTL <= 0 {
		opts.MemberTTL = 3 * opts.Heartbeat
	}
	if opts.ForgetAfter <= opts.MemberTTL {
		return nil, fmt.Errorf("cloudgate: fleet: ForgetAfter (%v) must exceed the member TTL (%v)", opts.ForgetAfter, opts.MemberTTL)
	}
	if opts.MemberID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		opts.MemberID = "m-" + hex.EncodeToString(b[:])
	}
	if opts.Logf == nil {
		opts.Logf = klog.Infof
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	client, err := newClient(cfg, cfg.RedisTimeout.Duration)
	if err != nil {
		return nil, err
	}
	f := &Fleet{
		cfg:     cfg,
		opts:    opts,
		clock:   opts.Clock,
		obs:     opts.Observer,
		client:  client,
		prefix:  "cloudgate:{" + cfg.Account + "}:",
		timeout: cfg.RedisTimeout.Duration,
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if f.obs == nil {
		f.obs = nopObserver{}
	}
	if err := f.heartbeat(); err != nil {
		f.setFallback(true, err)
	}
	go f.loop()
	return f, nil
}

// newClient connects to cfg's Redis (cfg validated, with its defaults) with
// every call bounded by t: the client a member uses, and the probe's.
func newClient(cfg Config, t time.Duration) (redis.UniversalClient, error) {
	pw, err := cfg.password()
	if err != nil {
		return nil, err
	}
	spw, err := cfg.sentinelPassword()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	addrs := cfg.Redis.Addresses
	if cfg.Redis.Address != "" {
		addrs = []string{cfg.Redis.Address}
	}
	// One address: a single Redis; with MasterName: Sentinel (the master is
	// looked up at dial, a failover re-dials the new master); several: a
	// Cluster (every key of the account in one slot, see the hash tag).
	return redis.NewUniversalClient(&redis.UniversalOptions{
		Addrs:            addrs,
		MasterName:       cfg.Redis.MasterName,
		IsClusterMode:    cfg.Redis.MasterName == "" && len(cfg.Redis.Addresses) > 0,
		Username:         cfg.Redis.Username,
		Password:         pw,
		SentinelPassword: spw,
		TLSConfig:        tlsCfg,
		// Every call is bounded by the context's deadline (RedisTimeout);
		// no retries, which would multiply the bound.
		ContextTimeoutEnabled: true,
		DialTimeout:           t,
		ReadTimeout:           t,
		WriteTimeout:          t,
		PoolTimeout:           t,
		MaxRetries:            -1,
		DialerRetries:         1,
		PoolSize:              8,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	}), nil
}

// Member returns this member's id in Redis.
func (f *Fleet) Member() string { return f.opts.MemberID }

// Fallback reports whether the member is serving from its local shares.
func (f *Fleet) Fallback() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fallback
}

// Close stops the heartbeat, closes every Limiter (their waiters get
// ErrClosed), deregisters the member (best effort, bounded) so the others'
// shares grow at once, and closes the Redis client. It is idempotent.
func (f *Fleet) Close() {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return
	}
	f.closed = true
	ls := append([]*Limiter(nil), f.limiters...)
	f.mu.Unlock()
	close(f.stop)
	<-f.done
	for _, l := range ls {
		l.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	_ = heartbeatScript.Run(ctx, f.client, []string{f.key("weights"), f.key("heartbeats"), f.key("held"), f.key("claims"), f.key("forget")},
		f.opts.MemberID, 0, f.opts.MemberTTL.Milliseconds(), "leave", f.opts.ForgetAfter.Milliseconds()).Err()
	cancel()
	_ = f.client.Close()
}

// open reports failureMode open: a member away from Redis keeps its floor.
func (f *Fleet) open() bool { return f.cfg.FailureMode != FailureClosed }

func (f *Fleet) key(parts ...string) string { return f.prefix + strings.Join(parts, ":") }

// fractionLocked returns this member's static share as a fraction of a
// quota, and the number of members known at the last heartbeat. It is the
// claim the last heartbeat recorded in Redis (its weight's part of what the
// fallen members' claims leave), which the others hold back while this
// member is away; minShare before any heartbeat.
func (f *Fleet) fractionLocked() (float64, int) {
	if f.away {
		if f.open() {
			return f.floor, f.members
		}
		return 0, f.members
	}
	if !f.known {
		return f.cfg.MinShare, 0
	}
	return min(1, f.claim), f.members
}

// loop runs the heartbeat until Close.
func (f *Fleet) loop() {
	defer close(f.done)
	tk := f.clock.NewTicker(f.opts.Heartbeat)
	defer tk.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-tk.C():
		}
		if err := f.heartbeat(); err != nil {
			f.redisResult(err)
			f.heartbeatFailed()
			if f.awayTooLong() {
				f.goAway()
			}
		} else {
			f.redisResult(nil)
			f.setFallback(false, nil)
			f.heartbeatAnswered()
		}
	}
}

// heartbeat registers the member, reads the membership and the families'
// state, and updates the shares and gauges.
func (f *Fleet) heartbeat() error {
	f.mu.Lock()
	ls := append([]*Limiter(nil), f.limiters...)
	f.mu.Unlock()
	keys := []string{f.key("weights"), f.key("heartbeats"), f.key("held"), f.key("claims"), f.key("forget")}
	for _, l := range ls {
		keys = append(keys, l.keys[keyCount], l.keys[keyAIMD])
	}
	f.mu.Lock()
	current, _ := f.fractionLocked()
	f.mu.Unlock()
	sent := f.clock.Now()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	v, err := heartbeatScript.Run(ctx, f.client, keys,
		f.opts.MemberID, strconv.FormatFloat(f.cfg.Weight, 'g', -1, 64), f.opts.MemberTTL.Milliseconds(), "",
		f.opts.ForgetAfter.Milliseconds(), strconv.FormatFloat(current, 'g', -1, 64),
		f.cfg.MaxMembers, strconv.FormatFloat(f.cfg.MinShare, 'g', -1, 64)).Slice()
	if err != nil {
		return err
	}
	if len(v) != 5 {
		return fmt.Errorf("heartbeat: unexpected reply %v", v)
	}
	members, _ := v[0].([]any)
	fams, _ := v[1].([]any)
	if len(members)%2 != 0 || len(fams) != 2*len(ls) {
		return fmt.Errorf("heartbeat: unexpected reply %v", v)
	}
	var total float64
	for i := 1; i < len(members); i += 2 {
		s, _ := members[i].(string)
		w, err := strconv.ParseFloat(s, 64)
		if err == nil && w > 0 {
			total += w
		}
	}
	held, _ := strconv.ParseFloat(fmt.Sprint(v[2]), 64)
	fallen, _ := v[3].(int64)
	claim, err := strconv.ParseFloat(fmt.Sprint(v[4]), 64)
	if err != nil || claim < 0 || claim > 1 {
		return fmt.Errorf("heartbeat: unexpected claim %v", v[4])
	}
	now := f.clock.Now()
	f.mu.Lock()
	f.known = true
	f.lastOK = sent
	f.away = false // back in Redis with a new claim; the limiters follow at setFallback(false)
	f.claim = claim
	f.members = len(members) / 2
	f.fallen = int(fallen)
	f.held = held
	f.totalWeight = total
	f.floor = claim
	if total > 0 {
		f.floor = min(claim, f.cfg.Weight/total)
	}
	if f.floor <= 0 {
		// Everything held for fallen members: the claim is 0, but a member
		// cut from Redis in failureMode open never goes to zero on its own.
		f.floor = f.cfg.MinShare
		if total > 0 {
			f.floor = min(f.floor, f.cfg.Weight/total)
		}
	}
	fraction, n := f.fractionLocked()
	f.mu.Unlock()
	for i, l := range ls {
		count, _ := strconv.ParseFloat(fmt.Sprint(fams[2*i]), 64)
		rate, _ := strconv.ParseFloat(fmt.Sprint(fams[2*i+1]), 64)
		l.heartbeat(now, fraction, n, count, rate)
	}
	return nil
}

// heartbeatFailed reports the coming stop of a member whose heartbeat
// failed while it stays on the shared budget (its admissions reach Redis
// and keep it out of fallback): the others forget it ForgetAfter after its
// last recorded heartbeat, and from lastOK + awayLimit the first admission
// Redis does not answer stops it at once (failureMode closed). Reported
// now, so the alert on the stop fires before it and not at it.
func (f *Fleet) heartbeatFailed() {
	f.mu.Lock()
	if f.fallback || f.stopWarned || f.closed {
		f.mu.Unlock()
		return
	}
	stop := f.stopAtLocked()
	if stop.IsZero() {
		f.mu.Unlock()
		return
	}
	f.stopWarned = true
	f.mu.Unlock()
	f.obs.StopAt(stop)
}

// heartbeatAnswered withdraws the stop heartbeatFailed reported.
func (f *Fleet) heartbeatAnswered() {
	f.mu.Lock()
	warned := f.stopWarned && !f.fallback
	f.stopWarned = false
	f.mu.Unlock()
	if warned {
		f.obs.StopAt(time.Time{})
	}
}

// awayLimit is how long after sending its last answered heartbeat a member
// cut from Redis may serve its claim from its local share: ForgetAfter minus
// one member TTL. The others free the claim once Redis' clock shows
// ForgetAfter since it recorded that heartbeat, which was after the member
// sent it; the TTL is a margin for the two clocks (Redis' TIME is the wall
// clock, this member's the monotonic one) and for the heartbeat that checks.
func (f *Fleet) awayLimit() time.Duration { return f.opts.ForgetAfter - f.opts.MemberTTL }

// stopAtLocked returns when this member, cut from Redis, will admit nothing
// (failureMode closed, once it has reached Redis: lastOK + awayLimit, on
// the wall clock); the zero time when it never stops (failureMode open, or
// it never reached Redis and serves MinShare).
func (f *Fleet) stopAtLocked() time.Time {
	if f.open() || !f.known {
		return time.Time{}
	}
	return f.clock.Now().Add(f.awayLimit() - f.clock.Since(f.lastOK))
}

// awayTooLong reports whether this member has been without an answered
// heartbeat for awayLimit (never before its first one: a member that never
// reached Redis is not registered, and serves minShare).
func (f *Fleet) awayTooLong() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.away || (f.known && f.clock.Since(f.lastOK) >= f.awayLimit())
}

// goAway stops every limiter's local admissions: this member has been cut
// from Redis for awayLimit, so the others may have freed its claim, and
// serving it locally would put the fleet over the quota. It stays in
// fallback, probing Redis, and rejoins at the first heartbeat answered.
func (f *Fleet) goAway() {
	f.transition.Lock()
	defer f.transition.Unlock()
	f.mu.Lock()
	// Looked at again under the lock: a heartbeat may have been answered
	// since the caller looked.
	if f.away || f.closed || !f.known || f.clock.Since(f.lastOK) < f.awayLimit() {
		f.mu.Unlock()
		return
	}
	if !f.fallback {
		// Its heartbeats fail but its admissions reach Redis (which resets
		// the failure count): every call it admits is counted in the
		// shared budget, whatever the membership says. Going away would
		// move it to its floor, admitted locally, which nobody holds back
		// once its claim is freed. It goes away when its admissions fail
		// too (fallback), at the next heartbeat.
		f.mu.Unlock()
		return
	}
	f.away = true
	wasFallback := f.fallback
	f.fallback, f.failures = true, 0
	ls := append([]*Limiter(nil), f.limiters...)
	floor, n := f.fractionLocked()
	since := f.clock.Since(f.lastOK)
	stop := f.stopAtLocked()
	f.mu.Unlock()
	if !wasFallback {
		f.obs.FallbackChanged(true)
		f.obs.StopAt(stop)
	}
	if f.open() {
		f.opts.Logf("cloudgate: fleet %q: no answer from Redis at %s for %v (forgetAfter %v): the others may have freed this member's share; failureMode open: serving its floor, %s of the quota, until Redis answers; probing every %v",
			f.cfg.Account, f.cfg.redisTarget(), since.Round(time.Millisecond), f.opts.ForgetAfter, strconv.FormatFloat(floor, 'g', 3, 64), f.opts.Heartbeat)
	} else {
		f.opts.Logf("cloudgate: fleet %q: no answer from Redis at %s for %v (forgetAfter %v): the others may have freed this member's share; failureMode closed: admitting no call until Redis answers; probing every %v",
			f.cfg.Account, f.cfg.redisTarget(), since.Round(time.Millisecond), f.opts.ForgetAfter, f.opts.Heartbeat)
	}
	for _, l := range ls {
		l.goAway(n, floor)
	}
}

// setFallback moves every limiter to its local bucket (on) or back to the
// shared budget (off), reporting the transition.
func (f *Fleet) setFallback(on bool, cause error) {
	f.transition.Lock()
	defer f.transition.Unlock()
	f.mu.Lock()
	if f.fallback == on || (f.closed && on) {
		f.mu.Unlock()
		return
	}
	f.fallback = on
	f.failures = 0
	f.stopWarned = false
	ls := append([]*Limiter(nil), f.limiters...)
	fraction, n := f.fractionLocked()
	var stop time.Time
	if on {
		stop = f.stopAtLocked()
	}
	f.mu.Unlock()
	// Report first, so that whoever sees a call served by the fallback
	// bucket also sees the transition.
	f.obs.FallbackChanged(on)
	f.obs.StopAt(stop)
	if on {
		shares := ""
		for _, l := range ls {
			shares += fmt.Sprintf(", %s %.3g/s", l.family, fraction*l.quota)
		}
		f.opts.Logf("cloudgate: fleet %q: Redis at %s unavailable (%s); serving from this member's local share: %s of the quota (%d members known)%s; probing every %v",
			f.cfg.Account, f.cfg.redisTarget(), redisErrorText(cause), strconv.FormatFloat(fraction, 'g', 3, 64), n,
			shares, f.opts.Heartbeat)
	} else {
		f.opts.Logf("cloudgate: fleet %q: Redis at %s answers again; back on the shared budget", f.cfg.Account, f.cfg.redisTarget())
	}
	for _, l := range ls {
		if on {
			l.enterFallback(fraction, n)
		} else {
			l.leaveFallback()
		}
	}
}

// redisResult counts the outcome of a Redis call: a success resets the
// count of consecutive failures; the FallbackAfter-th failure in a row
// switches the member to fallback. It reports whether the member is in
// fallback now.
func (f *Fleet) redisResult(err error) bool {
	f.mu.Lock()
	if err == nil {
		f.failures = 0
		fb := f.fallback
		f.mu.Unlock()
		return fb
	}
	f.failures++
	n, fb := f.failures, f.fallback
	f.mu.Unlock()
	f.obs.RedisError()
	if fb {
		return true
	}
	if n >= f.cfg.FallbackAfter {
		f.setFallback(true, err)
		return true
	}
	return false
}

// heldShare returns the fraction of the quota held for fallen members at the last
// heartbeat, and how many members had fallen.
func (f *Fleet) heldShare() (fraction float64, fallen int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held, f.fallen
}

// redisErrorText describes err for a log line.
func redisErrorText(err error) string {
	switch {
	case err == nil:
		return "unknown error"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within redisTimeout"
	default:
		return err.Error()
	}
}

// register adds l to the fleet, in the fleet's current mode.
func (f *Fleet) register(l *Limiter) error {
	f.transition.Lock()
	defer f.transition.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return errors.New("cloudgate: fleet closed")
	}
	for _, o := range f.limiters {
		if o.family == l.family {
			return fmt.Errorf("cloudgate: fleet %q: family %q already has a limiter", f.cfg.Account, l.family)
		}
	}
	f.limiters = append(f.limiters, l)
	fraction, n := f.fractionLocked()
	if f.away {
		l.goAway(n, fraction)
	} else if f.fallback {
		l.enterFallback(fraction, n)
	} else {
		l.setShare(fraction, n)
	}
	return nil
}
