package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"

	"github.com/cloudgate/cloudgate/limiter"
)

// The chaos timeline (--chaos-timeline): what happens in one column from
// the outage's start until quiescence, so that the time from the outage's
// end to convergence can be attributed — to the breaker, the adaptive
// rate, the controllers' requeue delays, the not-found guard's holds or a
// list refresh. Times are simulated seconds since the outage's end
// (negative: during the outage).

// TimelineEvent is one thing that happened.
type TimelineEvent struct {
	T float64 `json:"t"`
	// Kind: call (a controller's call through the column), upstream (a
	// request on the wire), delete (a Node deleted), breaker, rate (a
	// bucket's effective rate), condition (a quiescence condition
	// changed).
	Kind   string `json:"kind"`
	What   string `json:"what"`
	Detail string `json:"detail,omitempty"`
}

// ChaosTimeline is a column's timeline and its summary lines.
type ChaosTimeline struct {
	Summary []string        `json:"summary"`
	Events  []TimelineEvent `json:"events"`
	// Dropped counts events beyond the cap (routine ones are aggregated).
	Dropped int `json:"dropped,omitempty"`
}

// timelineCap bounds the events kept per column.
const timelineCap = 20000

type timeline struct {
	reg *prometheus.Registry // nil: bare column

	mu       sync.Mutex
	end      time.Time // the outage's end (zero until it ends)
	start    time.Time // the outage's start
	events   []TimelineEvent
	dropped  int
	firstOK  map[string]bool // kind/what -> a success was recorded
	breakers map[string]string
	rates    map[string]float64
	conds    string
}

func newTimeline(reg *prometheus.Registry) *timeline {
	return &timeline{reg: reg, firstOK: map[string]bool{}, breakers: map[string]string{}, rates: map[string]float64{}}
}

// begin starts recording (the outage starts now).
func (t *timeline) begin() {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.start = time.Now()
	t.mu.Unlock()
}

// outageEnded sets the origin of the times.
func (t *timeline) outageEnded(at time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.end = at
	// Events so far were timed from the start; shift them.
	for i := range t.events {
		t.events[i].T -= at.Sub(t.start).Seconds()
	}
	t.mu.Unlock()
}

// add records an event now; when once is set, only the first event with
// that kind and what (per phase: outage, recovery) is kept.
func (t *timeline) add(kind, what, detail string, once bool) {
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.start.IsZero() {
		return
	}
	origin, phase := t.start, "outage"
	if !t.end.IsZero() {
		origin, phase = t.end, "recovery"
	}
	if once {
		k := phase + "/" + kind + "/" + what + "/" + detail
		if t.firstOK[k] {
			return
		}
		t.firstOK[k] = true
	}
	if len(t.events) >= timelineCap {
		t.dropped++
		return
	}
	t.events = append(t.events, TimelineEvent{T: now.Sub(origin).Seconds(), Kind: kind, What: what, Detail: detail})
}

// call records a controller's call outcome: every failure and write, the
// first success of each method per phase, every "does not exist".
func (t *timeline) call(method string, write bool, err error) {
	if t == nil {
		return
	}
	if err == nil {
		t.add("call", method, "ok", !write)
		return
	}
	t.add("call", method, classifyErr(err), false)
}

// classifyErr names an error the way the timeline reads it.
func classifyErr(err error) string {
	var retry *cloudproviderapi.RetryError
	switch {
	case errors.Is(err, cloudprovider.InstanceNotFound):
		return "not found"
	case limiter.IsOpen(err):
		if errors.As(err, &retry) {
			return fmt.Sprintf("breaker open (RetryError %.1fs)", retry.RetryAfter().Seconds())
		}
		return "breaker open"
	case errors.As(err, &retry):
		what := "RetryError"
		switch msg := err.Error(); {
		case strings.Contains(msg, "notFoundGuard"):
			what = "guard hold"
		case strings.Contains(msg, "token"):
			what = "token wait"
		}
		return fmt.Sprintf("%s %.1fs", what, retry.RetryAfter().Seconds())
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	msg := err.Error()
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return "error: " + msg
}

// upstream records a request on the wire: every failure, the first
// success per endpoint and phase, and every list page.
func (t *timeline) upstream(req *http.Request, status int) {
	if t == nil {
		return
	}
	what := req.Method + " " + endpoint(req.URL.Path)
	ok := status >= 200 && status < 300
	switch {
	case req.URL.Path == "/v1/instances" && req.Method == http.MethodGet && !req.URL.Query().Has("name"):
		t.add("upstream", "list page", fmt.Sprint(status), false) // a list refresh
	case ok:
		t.add("upstream", what, "2xx", true)
	default:
		t.add("upstream", what, fmt.Sprint(status), true)
	}
}

// endpoint drops the IDs from a simcloud path.
func endpoint(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := 2; i < len(parts); i += 2 {
		parts[i] = "{id}"
	}
	return "/" + strings.Join(parts, "/")
}

// sample reads the breaker states and bucket rates and records changes,
// and the quiescence conditions.
func (t *timeline) sample(q *Quiescence) {
	if t == nil {
		return
	}
	if t.reg != nil {
		states := breakerStates(t.reg)
		rates := bucketRates(t.reg)
		for fam, st := range states {
			t.mu.Lock()
			changed := t.breakers[fam] != st
			t.breakers[fam] = st
			t.mu.Unlock()
			if changed {
				t.add("breaker", fam, st, false)
			}
		}
		for b, r := range rates {
			t.mu.Lock()
			old, seen := t.rates[b]
			changed := !seen || math.Abs(r-old) >= 0.1*math.Max(old, 0.1) || (r != old && r == rates[b+"/configured"])
			if changed {
				t.rates[b] = r
			}
			t.mu.Unlock()
			if changed && !strings.HasSuffix(b, "/configured") {
				t.add("rate", b, fmt.Sprintf("%.2f/s (configured %.2f/s)", r, rates[b+"/configured"]), false)
			}
		}
	}
	if q != nil {
		var unmet []string
		for _, c := range []struct {
			name string
			ok   bool
		}{{"nodes_initialized", q.NodesInitialized}, {"lbs_current", q.LBsCurrent}, {"routes_match", q.RoutesMatch},
			{"nodes_gone", q.NodesGone}, {"none_waiting", q.NoneWaiting}} {
			if !c.ok {
				unmet = append(unmet, c.name)
			}
		}
		s := "all met"
		if len(unmet) > 0 {
			s = "unmet: " + strings.Join(unmet, ", ")
		}
		t.mu.Lock()
		changed := t.conds != s
		t.conds = s
		t.mu.Unlock()
		if changed {
			t.add("condition", "quiescence", s, false)
		}
	}
}

// run samples every simulated second until ctx ends.
func (t *timeline) run(ctx context.Context, c *Cluster) {
	if t == nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		q, err := c.Quiescence()
		if err != nil {
			continue
		}
		t.sample(&q)
	}
}

// bucketRates reads each bucket's effective and configured rates (real
// calls per second), the configured ones under "NAME/configured".
func bucketRates(reg *prometheus.Registry) map[string]float64 {
	mfs, err := reg.Gather()
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		suffix := ""
		switch mf.GetName() {
		case "cloudgate_limiter_effective_rate":
		case "cloudgate_limiter_configured_rate":
			suffix = "/configured"
		default:
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "bucket" {
					out[l.GetValue()+suffix] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}

// result sorts the events and writes the summary: per kind and what, the
// first and last time in recovery, and the count.
func (t *timeline) result(conds map[string]*float64) *ChaosTimeline {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	ev := slices.Clone(t.events)
	dropped := t.dropped
	t.mu.Unlock()
	sort.SliceStable(ev, func(i, j int) bool { return ev[i].T < ev[j].T })
	out := &ChaosTimeline{Events: ev, Dropped: dropped}
	var keys []string
	for k, v := range conds {
		if v != nil {
			keys = append(keys, fmt.Sprintf("%s %.1fs", k, *v))
		} else {
			keys = append(keys, k+" never")
		}
	}
	sort.Strings(keys)
	out.Summary = append(out.Summary, "conditions met after the outage's end: "+strings.Join(keys, ", "))
	type agg struct {
		first, last float64
		n           int
	}
	groups := map[string]*agg{}
	var order []string
	for _, e := range ev {
		if e.Kind == "breaker" || e.Kind == "rate" || e.Kind == "condition" || e.Kind == "delete" {
			out.Summary = append(out.Summary, fmt.Sprintf("%7.1fs %-9s %s %s", e.T, e.Kind, e.What, e.Detail))
			continue
		}
		if e.T < 0 {
			continue
		}
		k := fmt.Sprintf("%-9s %s: %s", e.Kind, e.What, e.Detail)
		g, ok := groups[k]
		if !ok {
			g = &agg{first: e.T}
			groups[k] = g
			order = append(order, k)
		}
		g.last, g.n = e.T, g.n+1
	}
	for _, k := range order {
		g := groups[k]
		out.Summary = append(out.Summary, fmt.Sprintf("%7.1fs..%.1fs %s (x%d)", g.first, g.last, k, g.n))
	}
	return out
}
