//go:build linux

package real

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// The failure scenarios: what breaks when the account, not the CCM, sets
// the limits (`make bench-real-aws-scenario`, bench/RESULTS.real-aws-scenarios.md).
const (
	scNearLimit = "near-limit" // a neighbour tenant draws a steady share of the account's buckets
	scLaunchLag = "launch-lag" // EC2 does not describe a new instance for its first seconds
	scStorm     = "storm"      // a neighbour drains the account's buckets for a while, then stops
)

// Scenario is one run's scenario and its knob.
type Scenario struct {
	Name string
	// Share (near-limit): the neighbour's requests per second on each of
	// NeighbourActions, as a share of the bucket's refill.
	Share float64
	// Lag (launch-lag): how long each new instance is unknown to
	// DescribeInstances; LagNodes Nodes join at once after the warm-up
	// (and the churn's joins lag too).
	Lag      time.Duration
	LagNodes int
	// Storm (storm): how long the neighbour drains the buckets, at
	// StormFactor times each one's refill, on every action a tenant sends.
	Storm       time.Duration
	StormFactor float64
	// Recover bounds the wait for the cluster to be current again (after
	// the storm's end, or after the lagging Nodes' instances show).
	Recover time.Duration
	// NeighbourActions are the buckets the near-limit neighbour uses.
	NeighbourActions []string
	// PollEvery is how often the monitor lists Nodes and load balancers.
	PollEvery time.Duration
	// Probes: every ProbeEvery (near-limit) ProbeNodes live Nodes' instances
	// get a second private address; the time until the Node shows it is
	// how old a Node's status was.
	ProbeEvery time.Duration
	ProbeNodes int
}

func (sc Scenario) knob() string {
	switch sc.Name {
	case scNearLimit:
		return fmt.Sprintf("neighbour at %.0f %% of each bucket's refill", 100*sc.Share)
	case scLaunchLag:
		return fmt.Sprintf("instances invisible for %v", sc.Lag)
	case scStorm:
		return fmt.Sprintf("%v storm", sc.Storm)
	}
	return sc.Name
}

// ScenarioFigures are one column's measurements in one scenario.
type ScenarioFigures struct {
	Column   string
	Nodes    int
	Scenario Scenario
	// NeighbourPerHour, NeighbourThrottledPerHour: the neighbour's
	// requests and RequestLimitExceeded (or Throttling) per hour over the
	// window (near-limit) or the storm; CCMThrottledPerHour the CCM's own.
	NeighbourPerHour, NeighbourThrottledPerHour, CCMThrottledPerHour float64
	CCMPerHour                                                       float64
	// InitSeconds: ScaleupNodes joining at once after the window (near-limit; -1: not all in time).
	InitSeconds float64
	// OldestStatus: the longest a probed address change took to show in
	// its Node's status; ProbesUnseen the probes never seen (their age is
	// then at least ProbeOpen).
	OldestStatus, ProbeOpen time.Duration
	Probes, ProbesUnseen    int
	// LBConverge: after each churn event in the window, the time until
	// every load balancer held exactly the live initialised Ready Nodes
	// (max; LBUnconverged events that did not get there).
	LBConverge    time.Duration
	LBEvents      int
	LBUnconverged int
	// Deleted: Nodes deleted whose instance was not terminated (the
	// harness terminates a leaving Node's instance first); DeletedGone
	// those whose instance was terminated (the lifecycle controller's job).
	Deleted, DeletedGone int
	// Launch lag: of the Nodes that joined with a lag, those initialised
	// more than lateAfter after their instance showed (or never), and the
	// time from registration to initialised and Ready (p50, max).
	Lagged, Late           int
	ReadyP50, ReadyMax     time.Duration
	ReadyNever             int
	ErrorsLogged           int
	LBMissing, LBExtra     int
	NodesStale             int
	Current                time.Duration // storm: from its end until every Node and LB is current (-1: not by Recover)
	ThrottledDuringStorm   int64
	StormNeighbourAnswered float64
	// The storm's RequestLimitExceeded answers to the CCM by action
	// (ec2sim's count) and, for cloudgate's CCM, by the method they were
	// sent for (its cloudgate_cloud_request_throttles_total).
	StormThrottledByAction, StormThrottledByMethod map[string]float64
}

// lateAfter: a Node initialised later than this after EC2 shows its
// instance was held back by the CCM, not by EC2.
const lateAfter = time.Minute

// monitor lists the world's Nodes and load balancers every PollEvery and
// keeps what the scenarios report: deletions, initialisation and Ready
// times, probes, and load balancer convergence after churn events.
type monitor struct {
	w  *world
	sc Scenario

	mu          sync.Mutex
	seen        map[string]bool      // Nodes seen listed
	deleted     map[string]time.Time // Nodes that disappeared, when
	initAt      map[string]time.Time // first seen initialised
	readyAt     map[string]time.Time // first seen initialised and Ready
	probes      map[string]probe     // by Node name: pending address changes
	probeDone   []time.Duration
	events      []time.Time // churn events not yet converged
	converged   []time.Duration
	lbCurrent   bool // at the last poll
	nodeCurrent bool
	lastMissing int
	lastExtra   int
	lastStale   int
	lastLBs     []string // at the last poll: each load balancer not current, with the Nodes behind its backends
}

type probe struct {
	ip string
	at time.Time
}

func newMonitor(w *world, sc Scenario) *monitor {
	m := &monitor{w: w, sc: sc, seen: map[string]bool{}, deleted: map[string]time.Time{}, initAt: map[string]time.Time{},
		readyAt: map[string]time.Time{}, probes: map[string]probe{}}
	w.onChurn = func(at time.Time) {
		m.mu.Lock()
		m.events = append(m.events, at)
		m.mu.Unlock()
	}
	return m
}

func (m *monitor) run(ctx context.Context) {
	tick := time.NewTicker(m.sc.PollEvery)
	defer tick.Stop()
	for {
		m.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func initialisedNode(n *corev1.Node) bool {
	return n.Spec.ProviderID != "" && !hasTaint(n, e2e.UninitializedTaint) && len(n.Status.Addresses) > 0
}

func (m *monitor) poll(ctx context.Context) {
	list, err := m.w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return // the next poll tries again; ctx's end stops the loop
	}
	now := time.Now()
	w := m.w
	w.mu.Lock()
	ids, gone := w.ids, w.gone
	present := map[string]bool{}
	known := map[string]bool{}    // instances of existing Nodes
	expected := map[string]bool{} // instances a load balancer must hold
	stale := 0
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range list.Items {
		n := &list.Items[i]
		present[n.Name] = true
		m.seen[n.Name] = true
		id := ids[n.Name]
		known[id] = true
		init := initialisedNode(n)
		if init {
			if _, ok := m.initAt[n.Name]; !ok {
				m.initAt[n.Name] = now
			}
			if isReady(n) {
				if _, ok := m.readyAt[n.Name]; !ok {
					m.readyAt[n.Name] = now
				}
			}
		}
		switch {
		case gone[n.Name]:
			stale++ // a Node whose instance is terminated: the lifecycle controller's to delete
		case !init:
			stale++
		case isReady(n):
			expected[id] = true
		}
		if p, ok := m.probes[n.Name]; ok && hasAddress(n, p.ip) {
			m.probeDone = append(m.probeDone, now.Sub(p.at))
			delete(m.probes, n.Name)
		}
	}
	for name := range m.seen {
		if !present[name] {
			if _, ok := m.deleted[name]; !ok {
				m.deleted[name] = now
			}
		}
	}
	names := map[string]string{} // instance ID → Node name, for the report
	for name, id := range ids {
		names[id] = name
	}
	w.mu.Unlock()
	missing, extra := 0, 0
	var lbs []string
	for _, lb := range append(w.sim.ClassicLoadBalancers(), w.sim.NetworkLoadBalancers()...) {
		reg := map[string]bool{}
		for _, in := range lb.Instances {
			id, _, _ := strings.Cut(in, ":")
			reg[id] = true
		}
		var miss, ext []string
		for id := range expected {
			if !reg[id] {
				miss = append(miss, names[id]+"="+id)
			}
		}
		for id := range reg {
			if !known[id] {
				ext = append(ext, names[id]+"="+id)
			}
		}
		missing, extra = missing+len(miss), extra+len(ext)
		if len(miss)+len(ext) > 0 {
			slices.Sort(miss)
			slices.Sort(ext)
			lbs = append(lbs, fmt.Sprintf("%s (%d registered): missing %v; extra %v", lb.Name, len(reg), miss, ext))
		}
	}
	slices.Sort(lbs)
	m.lastMissing, m.lastExtra, m.lastStale, m.lastLBs = missing, extra, stale, lbs
	m.lbCurrent = missing == 0 && extra == 0
	m.nodeCurrent = stale == 0
	if m.lbCurrent && len(m.events) > 0 {
		m.converged = append(m.converged, now.Sub(m.events[0]))
		m.events = nil
	}
}

func hasAddress(n *corev1.Node, ip string) bool {
	for _, a := range n.Status.Addresses {
		if a.Address == ip {
			return true
		}
	}
	return false
}

// probeAddresses gives k live Nodes' instances a second private address
// every ProbeEvery until ctx ends.
func (m *monitor) probeAddresses(ctx context.Context) {
	if m.sc.ProbeEvery <= 0 || m.sc.ProbeNodes <= 0 {
		return
	}
	tick := time.NewTicker(m.sc.ProbeEvery)
	defer tick.Stop()
	round := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		round++
		w := m.w
		w.mu.Lock()
		// The newest half of the live Nodes: the churn takes the oldest.
		cand := slices.Clone(w.live[len(w.live)/2:])
		if len(cand) == 0 {
			w.mu.Unlock()
			continue
		}
		var picked []ec2sim.Instance
		var names []string
		for i := 0; i < len(cand) && len(picked) < m.sc.ProbeNodes; i += max(1, len(cand)/m.sc.ProbeNodes) {
			name := cand[(i+round*7)%len(cand)]
			if w.gone[name] {
				continue
			}
			in := w.inst[name]
			in.Interfaces = slices.Clone(in.Interfaces)
			ifc := in.Interfaces[0]
			ip := fmt.Sprintf("10.200.%d.%d", round%250, len(picked)+1)
			ifc.PrivateIPs = append([]string{ifc.PrivateIPs[0]}, ip)
			in.Interfaces[0] = ifc
			w.inst[name] = in
			picked = append(picked, in)
			names = append(names, name)
		}
		w.mu.Unlock()
		now := time.Now()
		m.mu.Lock()
		for i, name := range names {
			// A probe still open keeps its first change's time.
			if _, open := m.probes[name]; !open {
				m.probes[name] = probe{ip: picked[i].Interfaces[0].PrivateIPs[1], at: now}
			} else {
				p := m.probes[name]
				p.ip = picked[i].Interfaces[0].PrivateIPs[1]
				m.probes[name] = p
			}
		}
		m.mu.Unlock()
		w.sim.Put(picked...)
	}
}

// waitCurrent polls until every Node and load balancer is current (or
// timeout) and returns how long from since.
func (m *monitor) waitCurrent(ctx context.Context, since time.Time, timeout time.Duration) time.Duration {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		m.poll(ctx)
		m.mu.Lock()
		ok := m.lbCurrent && m.nodeCurrent
		m.mu.Unlock()
		if ok {
			return time.Since(since)
		}
		select {
		case <-ctx.Done():
			return -1
		case <-time.After(m.sc.PollEvery):
		}
	}
	return -1
}

// serviceNodeSyncPeriod is the service controller's node sync period
// (unexported in k8s.io/cloud-provider/controllers/service): how often it
// retries the load balancer host updates that failed.
const serviceNodeSyncPeriod = 100 * time.Second

// errorLines counts klog error lines ("E1128 12:00:00.000000 ...") in the
// CCM's log after byte offset from.
var klogError = regexp.MustCompile(`^E\d{4} `)

func errorLines(path string, from int64) (int, int64) {
	f, err := os.Open(path)
	if err != nil {
		return 0, from
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return 0, from
	}
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var read int64
	for sc.Scan() {
		read += int64(len(sc.Bytes()) + 1)
		if klogError.Match(sc.Bytes()) {
			n++
		}
	}
	return n, from + read
}

// keepLog copies a CCM log into $CLOUDGATE_BENCH_REAL_AWS_KEEP (when set)
// as name.log: a failed run's whole log, read after the test's temporary
// directory is gone.
func keepLog(t *testing.T, path, name string) {
	dir := os.Getenv("CLOUDGATE_BENCH_REAL_AWS_KEEP")
	if dir == "" {
		return
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	dst := filepath.Join(dir, strings.NewReplacer(" ", "_", "(", "", ")", "", ":", "").Replace(name)+".log")
	if err == nil {
		err = os.WriteFile(dst, b, 0o644)
	}
	if err != nil {
		t.Logf("keeping %s: %v", path, err)
		return
	}
	t.Logf("the CCM's log is kept at %s", dst)
}

// lastErrorLines returns the CCM's last n klog error lines after byte
// offset from: what a failed run needs to be read without a rerun.
func lastErrorLines(path string, from int64, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if klogError.Match(sc.Bytes()) {
			out = append(out, sc.Text())
			if len(out) > n {
				out = out[1:]
			}
		}
	}
	return out
}

func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

func refillOf(o *Options, action string) float64 {
	if b, ok := o.Buckets[action]; ok {
		return b.Refill
	}
	return o.Bucket.Refill
}

// largestFirst renders counts as "key n, key n" from the largest.
func largestFirst(counts map[string]float64) string {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, counts[k])
	}
	return orDash(strings.Join(parts, ", "))
}

func throttledIn(s0, s1 map[string]ec2sim.ActionStats) (req, thr int64) {
	for a, v := range s1 {
		req += v.Requests - s0[a].Requests
		thr += v.Throttled - s0[a].Throttled
	}
	return req, thr
}

// runScenario runs one column through one scenario at n Nodes.
func runScenario(ctx context.Context, t *testing.T, o *Options, sc Scenario, col column, n int, etcdBin, apiserverBin string) *ScenarioFigures {
	oo := *o
	if sc.Name == scLaunchLag {
		oo.LaunchLag = sc.Lag
	}
	o = &oo
	w := func() *world {
		starting.Lock()
		defer starting.Unlock()
		w := newWorld(ctx, t, o, col, etcdBin, apiserverBin)
		w.populate(ctx, n)
		w.startCCM(ctx)
		return w
	}()
	start := time.Now()
	m := newMonitor(w, sc)
	bg, stop := context.WithCancel(ctx)
	// The churn stops when the scenario's phase does (the window, the
	// lagging Nodes' join, the storm): what follows converges to a fixed
	// cluster.
	churnCtx, stopChurn := context.WithCancel(bg)
	var wg, churnWG sync.WaitGroup
	churnWG.Go(func() { w.churn(churnCtx) })
	wg.Go(func() { m.run(bg) })
	defer func() { stop(); churnWG.Wait(); wg.Wait() }()
	endChurn := func() { stopChurn(); churnWG.Wait() }
	f := &ScenarioFigures{Column: col.name, Nodes: n, Scenario: sc, InitSeconds: math.NaN(), Current: -1}

	var neighbour *ec2sim.Tenant
	if sc.Name == scNearLimit {
		rates := map[string]float64{}
		for _, a := range sc.NeighbourActions {
			rates[a] = sc.Share * refillOf(o, a)
		}
		neighbour = &ec2sim.Tenant{URL: w.sim.URL, AccessKey: neighbourAccessKey, Rates: rates}
		if err := neighbour.Validate(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = neighbour.Run(bg) })
	}
	sleep(ctx, t, o.Warmup-time.Since(start))
	ccm0, nb0, t0 := w.sim.CallerStats(ccmAccessKey), w.sim.CallerStats(neighbourAccessKey), time.Now()
	logFrom := logSize(w.ccm.Log)
	perHour := func(d time.Duration) float64 { return 3600 / d.Seconds() }
	var ccm1, nb1 map[string]ec2sim.ActionStats
	var t1 time.Time
	phaseEnd := func() {
		ccm1, nb1, t1 = w.sim.CallerStats(ccmAccessKey), w.sim.CallerStats(neighbourAccessKey), time.Now()
	}

	switch sc.Name {
	case scNearLimit:
		pctx, pstop := context.WithCancel(bg)
		var pwg sync.WaitGroup
		pwg.Go(func() { m.probeAddresses(pctx) })
		sleep(ctx, t, o.Window)
		pstop()
		pwg.Wait()
		phaseEnd()
		endChurn()
		if o.ScaleupNodes > 0 {
			from := time.Now()
			names, err := w.joinNames(ctx, o.ScaleupNodes, false)
			if err != nil {
				t.Fatal(err)
			}
			f.InitSeconds, err = w.initialised(ctx, names, from, o.ScaleupTimeout)
			if err != nil {
				t.Logf("%s: scale-up: %v", col.name, err)
				f.InitSeconds = -1
			}
		}
	case scLaunchLag:
		if _, err := w.joinNames(ctx, sc.LagNodes, true); err != nil {
			t.Fatal(err)
		}
		endChurn()
		// Every lagging Node's instance shows after Lag; then the CCM has
		// Recover to initialise them, and they are Ready.
		sleep(ctx, t, sc.Lag)
		deadline := time.Now().Add(sc.Recover)
		for time.Now().Before(deadline) {
			m.poll(ctx)
			if m.lagSettled() {
				break
			}
			sleep(ctx, t, sc.PollEvery)
		}
		phaseEnd()
	case scStorm:
		rates := map[string]float64{}
		for _, a := range ec2sim.TenantActions() {
			rates[a] = sc.StormFactor * refillOf(o, a)
		}
		storm := &ec2sim.Tenant{URL: w.sim.URL, AccessKey: neighbourAccessKey, Rates: rates}
		sctx, sstop := context.WithTimeout(bg, sc.Storm)
		c0 := w.sim.CallerStats(ccmAccessKey)
		var m0 []e2e.Sample
		if col.cloudgate {
			m0 = w.mustMetrics()
		}
		if err := storm.Run(sctx); err != nil {
			t.Fatal(err)
		}
		sstop()
		c1, nbs := w.sim.CallerStats(ccmAccessKey), w.sim.CallerStats(neighbourAccessKey)
		if col.cloudgate {
			f.StormThrottledByMethod = counterDelta(m0, w.mustMetrics(), "cloudgate_cloud_request_throttles_total", "method")
		}
		endChurn()
		_, f.ThrottledDuringStorm = throttledIn(c0, c1)
		f.StormThrottledByAction = map[string]float64{}
		for a, v := range c1 {
			if d := v.Throttled - c0[a].Throttled; d > 0 {
				f.StormThrottledByAction[a] = float64(d)
			}
		}
		req, thr := throttledIn(nb0, nbs)
		if req > 0 {
			f.StormNeighbourAnswered = 1 - float64(thr)/float64(req)
		}
		end := time.Now()
		f.Current = m.waitCurrent(ctx, end, sc.Recover)
		phaseEnd()
		m.mu.Lock()
		// Converged: nothing was lost; not by the deadline: what is still
		// missing or extra then is counted lost.
		if f.Current < 0 {
			f.LBMissing, f.LBExtra, f.NodesStale = m.lastMissing, m.lastExtra, m.lastStale
		}
		m.mu.Unlock()
		t.Logf("%s: current %v after the storm's end", col.name, f.Current)
		if f.Current < 0 {
			m.mu.Lock()
			lbs := strings.Join(m.lastLBs, "\n")
			m.mu.Unlock()
			t.Logf("%s: not current %v after the storm (%d backends missing, %d extra, %d Nodes stale); load balancers behind:\n%s\nthe CCM's last errors:\n%s",
				col.name, sc.Recover, f.LBMissing, f.LBExtra, f.NodesStale, lbs, strings.Join(lastErrorLines(w.ccm.Log, logFrom, 30), "\n"))
			keepLog(t, w.ccm.Log, col.name+"-storm")
		}
	}
	if done, err := w.ccm.Exited(); done {
		t.Fatalf("%s: the CCM exited: %v\n%s", col.name, err, e2e.Tail(w.ccm.Log, 40))
	}
	if w.churnErr != nil {
		t.Fatalf("%s: churn: %v", col.name, w.churnErr)
	}
	stop()
	wg.Wait()
	m.poll(ctx)
	span := t1.Sub(t0)
	req, thr := throttledIn(ccm0, ccm1)
	f.CCMPerHour, f.CCMThrottledPerHour = float64(req)*perHour(span), float64(thr)*perHour(span)
	req, thr = throttledIn(nb0, nb1)
	f.NeighbourPerHour, f.NeighbourThrottledPerHour = float64(req)*perHour(span), float64(thr)*perHour(span)
	f.ErrorsLogged, _ = errorLines(w.ccm.Log, logFrom)

	w.mu.Lock()
	defer w.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.deleted {
		if w.gone[name] {
			f.DeletedGone++
		} else {
			f.Deleted++
		}
	}
	for _, d := range m.probeDone {
		f.OldestStatus = max(f.OldestStatus, d)
	}
	f.Probes = len(m.probeDone) + len(m.probes)
	// A probe still open at the window's end says something only if it is
	// older than the oldest one seen.
	for _, p := range m.probes {
		if age := t1.Sub(p.at); age > f.OldestStatus {
			f.ProbesUnseen++
			f.ProbeOpen = max(f.ProbeOpen, age)
		}
	}
	f.LBEvents = len(m.converged) + min(len(m.events), 1)
	for _, d := range m.converged {
		f.LBConverge = max(f.LBConverge, d)
	}
	if len(m.events) > 0 {
		f.LBUnconverged = 1
	}
	if sc.Name == scLaunchLag {
		var ready []time.Duration
		for name, at := range w.joined {
			f.Lagged++
			visible := at.Add(sc.Lag)
			if _, del := m.deleted[name]; del {
				f.Late++
				f.ReadyNever++
				continue
			}
			if ia, ok := m.initAt[name]; !ok || ia.Sub(visible) > lateAfter {
				f.Late++
			}
			if ra, ok := m.readyAt[name]; ok {
				ready = append(ready, ra.Sub(at))
			} else {
				f.ReadyNever++
			}
		}
		sort.Slice(ready, func(i, j int) bool { return ready[i] < ready[j] })
		if len(ready) > 0 {
			f.ReadyP50, f.ReadyMax = ready[len(ready)/2], ready[len(ready)-1]
		}
	}
	t.Logf("%s at %d, %s: %+v", col.name, n, sc.knob(), *f)
	return f
}

// lagSettled: every lagging Node is initialised and Ready, or deleted.
func (m *monitor) lagSettled() bool {
	// w.mu before m.mu, as poll takes them.
	m.w.mu.Lock()
	defer m.w.mu.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	for name := range m.w.joined {
		_, del := m.deleted[name]
		_, ready := m.readyAt[name]
		if !del && !ready {
			return false
		}
	}
	return true
}

// runScenarios runs every column through each scenario at each size:
// the columns side by side, scenarios and sizes one after the other.
func runScenarios(t *testing.T, o *Options, scs []Scenario, cols []column, etcdBin, apiserverBin string, parallel bool) []*ScenarioFigures {
	var budget time.Duration
	for _, sc := range scs {
		if parallel {
			budget = max(budget, o.Warmup+o.Window+o.ScaleupTimeout+sc.Lag+sc.Storm+sc.Recover+15*time.Minute)
			continue
		}
		budget += o.Warmup + o.Window + o.ScaleupTimeout + sc.Lag + sc.Storm + sc.Recover + 15*time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), budget*time.Duration(len(o.Nodes)))
	defer cancel()
	var out []*ScenarioFigures
	var mu sync.Mutex
	t.Run("runs", func(t *testing.T) {
		for _, n := range o.Nodes {
			for _, sc := range scs {
				t.Run(fmt.Sprintf("nodes=%d/%s", n, strings.ReplaceAll(sc.knob(), " ", "_")), func(t *testing.T) {
					if parallel {
						t.Parallel()
					}
					for _, col := range cols {
						t.Run(col.name, func(t *testing.T) {
							t.Parallel()
							f := runScenario(ctx, t, o, sc, col, n, etcdBin, apiserverBin)
							mu.Lock()
							out = append(out, f)
							mu.Unlock()
						})
					}
				})
			}
		}
	})
	return out
}

func dur(d time.Duration) string {
	if d < 0 {
		return "not in time"
	}
	return fmt.Sprintf("%.0f s", d.Seconds())
}

// reportScenario renders one scenario's table.
func reportScenario(o *Options, name string, figs []*ScenarioFigures) string {
	var b bytes.Buffer
	slices.SortStableFunc(figs, func(a, c *ScenarioFigures) int {
		if a.Nodes != c.Nodes {
			return a.Nodes - c.Nodes
		}
		if k := strings.Compare(a.Scenario.knob(), c.Scenario.knob()); a.Scenario.Share != c.Scenario.Share || a.Scenario.Lag != c.Scenario.Lag || k != 0 {
			if a.Scenario.Share != c.Scenario.Share {
				return int(math.Copysign(1, a.Scenario.Share-c.Scenario.Share))
			}
			if a.Scenario.Lag != c.Scenario.Lag {
				return int(a.Scenario.Lag - c.Scenario.Lag)
			}
			return k
		}
		return slices.Index(o.Columns, a.Column) - slices.Index(o.Columns, c.Column)
	})
	switch name {
	case scNearLimit:
		fmt.Fprintf(&b, "| nodes | neighbour | column | neighbour's RequestLimitExceeded/h | neighbour's requests/h | CCM's RequestLimitExceeded/h | CCM's calls/h | %d Nodes initialised in | oldest Node status (address change → Node) | LB convergence after a Node change (max) | Nodes deleted, instance alive | Nodes deleted, instance terminated |\n", o.ScaleupNodes)
		fmt.Fprintf(&b, "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, f := range figs {
			init := "not all in time"
			if f.InitSeconds >= 0 {
				init = fmt.Sprintf("%.1f s", f.InitSeconds)
			}
			oldest := dur(f.OldestStatus)
			if f.ProbesUnseen > 0 {
				oldest = fmt.Sprintf("≥ %s (%d of %d probes never shown)", dur(max(f.OldestStatus, f.ProbeOpen)), f.ProbesUnseen, f.Probes)
			}
			lb := dur(f.LBConverge)
			if f.LBUnconverged > 0 {
				lb += fmt.Sprintf(" (%d of %d events not converged)", f.LBUnconverged, f.LBEvents)
			}
			fmt.Fprintf(&b, "| %d | %.0f %% | %s | %.0f | %.0f | %.0f | %.0f | %s | %s | %s | %d | %d |\n", f.Nodes, 100*f.Scenario.Share, f.Column,
				f.NeighbourThrottledPerHour, f.NeighbourPerHour, f.CCMThrottledPerHour, f.CCMPerHour, init, oldest, lb, f.Deleted, f.DeletedGone)
		}
	case scLaunchLag:
		fmt.Fprintf(&b, "| nodes | lag | column | Nodes joined with the lag | Nodes deleted, instance alive | initialised late (> %v after EC2 shows it, or never) | registration → initialised and Ready, p50 / max | never Ready | CCM's RequestLimitExceeded/h | errors logged |\n", lateAfter)
		fmt.Fprintf(&b, "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, f := range figs {
			ready := dur(f.ReadyP50) + " / " + dur(f.ReadyMax)
			if f.ReadyNever >= f.Lagged {
				ready = "– (none Ready)"
			}
			fmt.Fprintf(&b, "| %d | %v | %s | %d | %d | %d | %s | %d | %.0f | %d |\n", f.Nodes, f.Scenario.Lag, f.Column, f.Lagged, f.Deleted, f.Late,
				ready, f.ReadyNever, f.CCMThrottledPerHour, f.ErrorsLogged)
		}
	case scStorm:
		fmt.Fprintf(&b, "| nodes | storm | column | LB writes lost (backends missing + extra at the end) | Nodes deleted, instance alive | errors the CCM logged | storm's end → every Node and LB current | CCM's RequestLimitExceeded in the storm | neighbour's requests answered in the storm |\n")
		fmt.Fprintf(&b, "|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, f := range figs {
			fmt.Fprintf(&b, "| %d | %v | %s | %d | %d | %d | %s | %d | %.1f %% |\n", f.Nodes, f.Scenario.Storm, f.Column, f.LBMissing+f.LBExtra, f.Deleted, f.ErrorsLogged,
				dur(f.Current), f.ThrottledDuringStorm, 100*f.StormNeighbourAnswered)
		}
		b.WriteString("\nThe CCM's RequestLimitExceeded in the storm, by action (ec2sim's count) and, for cloudgate's CCM, by the\nprovider method they were sent for (its `cloudgate_cloud_request_throttles_total`; `unattributed`: the\nprovider's own context):\n\n")
		for _, f := range figs {
			fmt.Fprintf(&b, "- %s at %d: %s", f.Column, f.Nodes, largestFirst(f.StormThrottledByAction))
			if f.StormThrottledByMethod != nil {
				fmt.Fprintf(&b, "; by method: %s", largestFirst(f.StormThrottledByMethod))
			}
			b.WriteString(".\n")
		}
	}
	return b.String()
}
