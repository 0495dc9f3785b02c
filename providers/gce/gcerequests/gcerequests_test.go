package gcerequests

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud"
	"github.com/GoogleCloudPlatform/k8s-cloud-provider/pkg/cloud/meta"
	compute "google.golang.org/api/compute/v1"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/metrics/metricstest"
	"github.com/cloudgate/cloudgate/provider"
)

// count sums the counter name of m over the series matching labels.
func count(t *testing.T, m *metrics.Metrics, name string, labels map[string]string) float64 {
	t.Helper()
	return metricstest.Of(t, m, name, labels)
}

func newLimiter(t *testing.T, cfg provider.RequestGateConfig, clk *clocktesting.FakeClock) (*RateLimiter, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	cfg.Metrics = m
	if clk != nil {
		cfg.Clock = clk
	}
	g, err := NewGate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var pc = clk
	r := New(g, nil)
	if pc != nil {
		r.clock = pc
	}
	r.polls = &cloud.NopRateLimiter{} // the provider's 1 s poll pacing is not under test
	return r, m
}

func key(service, op string) *cloud.RateLimitKey {
	return &cloud.RateLimitKey{ProjectID: "p", Service: service, Operation: op, Version: meta.VersionGA}
}

func TestActionAndGroup(t *testing.T) {
	for _, c := range []struct{ service, op, action, group string }{
		{"Instances", "Get", "instances.get", GroupRead},
		{"Instances", "List", "instances.list", GroupList},
		{"Instances", "AggregatedList", "instances.aggregatedList", GroupList},
		{"Routes", "Insert", "routes.insert", GroupWrite},
		{"BackendServices", "GetHealth", "backendServices.getHealth", GroupRead},
		{"Operations", "Get", "operations.get", GroupOperation},
	} {
		if a := Action(key(c.service, c.op)); a != c.action || Group(a) != c.group {
			t.Errorf("%s.%s: action %q group %q, want %q %q", c.service, c.op, a, Group(a), c.action, c.group)
		}
	}
	if a := Action(nil); a != "unknown" {
		t.Errorf("nil key: %q", a)
	}
	b := Buckets("", GroupRead)
	if got := float64(b.Burst) + 60*b.QPS; got != PerMinute {
		t.Errorf("a bucket admits %v in 60 s, want the group's quota %d", got, PerMinute)
	}
}

// TestPairing: Observe answers the call Accept admitted under the same key
// (its code, its call's method), with calls of other keys in flight.
func TestPairing(t *testing.T) {
	r, m := newLimiter(t, provider.RequestGateConfig{}, nil)
	ctx := provider.WithCall(context.Background(), provider.Call{Method: "InstanceMetadata", Priority: limiter.PriorityNormal})
	k1, k2 := key("Instances", "Get"), key("Instances", "Get")
	if err := r.Accept(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if err := r.Accept(context.Background(), k2); err != nil {
		t.Fatal(err)
	}
	if r.Pending() != 2 {
		t.Fatalf("pending %d, want 2", r.Pending())
	}
	r.Observe(context.Background(), &googleapi.Error{Code: 404}, k2)
	r.Observe(ctx, nil, k1)
	r.Observe(ctx, nil, k1) // a second Observe of a key is not another request
	if r.Pending() != 0 {
		t.Errorf("pending %d after every Observe", r.Pending())
	}
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"service": "compute", "action": "instances.get", "method": "InstanceMetadata", "code": "200"}, 1},
		{map[string]string{"service": "compute", "action": "instances.get", "method": provider.Unattributed, "code": "404"}, 1},
		{map[string]string{"provider": "gce"}, 2},
	} {
		if got := count(t, m, "cloudgate_cloud_requests_total", c.labels); got != c.want {
			t.Errorf("cloudgate_cloud_requests_total%v = %v, want %v", c.labels, got, c.want)
		}
	}
}

// TestPollPairing: the generated client's operation polls ask with a new
// key each and Observe only the last; a context's next poll answers the
// previous one, Observe the last (the operation's own error is not the
// poll's), and a loop that ends with its context leaves none open.
func TestPollPairing(t *testing.T) {
	r, m := newLimiter(t, provider.RequestGateConfig{}, nil)
	ctx := provider.WithCall(context.Background(), provider.Call{Method: "CreateRoute", Priority: limiter.PriorityNormal})
	for range 3 {
		if err := r.Accept(ctx, key("Operations", "Get")); err != nil {
			t.Fatal(err)
		}
	}
	r.Observe(ctx, &googleapi.Error{Code: 400, Message: "INVALID - the operation failed"}, key("Operations", "Get"))
	if got := count(t, m, "cloudgate_cloud_requests_total", map[string]string{"action": "operations.get", "method": "CreateRoute", "code": "200"}); got != 3 {
		t.Errorf("polls answered 200: %v, want 3", got)
	}
	cctx, cancel := context.WithCancel(ctx)
	if err := r.Accept(cctx, key("Operations", "Get")); err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for r.Pending() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.Pending() != 0 {
		t.Errorf("a poll loop ended by its context left %d open", r.Pending())
	}
	if got := count(t, m, "cloudgate_cloud_requests_total", map[string]string{"action": "operations.get"}); got != 4 {
		t.Errorf("polls counted %v, want 4", got)
	}
}

// TestUnobservedCallsExpire: a call whose Observe never comes is answered
// "no answer" after MaxPending.
func TestUnobservedCallsExpire(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(10000, 0))
	r, m := newLimiter(t, provider.RequestGateConfig{}, clk)
	if err := r.Accept(context.Background(), key("Instances", "Get")); err != nil {
		t.Fatal(err)
	}
	clk.Step(MaxPending + 2*time.Minute)
	if err := r.Accept(context.Background(), key("Instances", "Get")); err != nil {
		t.Fatal(err)
	}
	if r.Pending() != 1 {
		t.Errorf("pending %d, want 1 (the expired call answered)", r.Pending())
	}
	if got := count(t, m, "cloudgate_cloud_requests_total", map[string]string{"code": "none"}); got != 1 {
		t.Errorf("expired calls counted %v, want 1", got)
	}
}

func TestAnswer(t *testing.T) {
	ctx := context.Background()
	gone, cancel := context.WithCancel(ctx)
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want provider.Answer
	}{
		{"ok", ctx, nil, provider.Answer{Code: 200}},
		{"429", ctx, &googleapi.Error{Code: 429}, provider.Answer{Code: 429, Throttled: true}},
		{"403 rateLimitExceeded", ctx, &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "rateLimitExceeded"}}},
			provider.Answer{Code: 403, Throttled: true}},
		{"403 forbidden", ctx, &googleapi.Error{Code: 403, Errors: []googleapi.ErrorItem{{Reason: "forbidden"}}}, provider.Answer{Code: 403}},
		{"404", ctx, &googleapi.Error{Code: 404}, provider.Answer{Code: 404}},
		{"503", ctx, &googleapi.Error{Code: 503}, provider.Answer{Code: 503, Failure: true}},
		{"429 Retry-After", ctx, &googleapi.Error{Code: 429, Header: http.Header{"Retry-After": {"7"}}},
			provider.Answer{Code: 429, Throttled: true, RetryAfter: 7 * time.Second}},
		{"wrapped 500", ctx, errors.Join(errors.New("ctx"), &googleapi.Error{Code: 500}), provider.Answer{Code: 500, Failure: true}},
		{"no answer", ctx, &url.Error{Op: "Get", URL: "u", Err: errors.New("refused")}, provider.Answer{Failure: true}},
		{"caller gone", gone, context.Canceled, provider.Answer{}},
	} {
		if got := Answer(c.ctx, c.err); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
	if got := pollAnswer(ctx, &googleapi.Error{Code: 400, Message: "op failed"}); got != (provider.Answer{Code: 200}) {
		t.Errorf("poll of a failed operation: %+v, want the poll's 200", got)
	}
	if got := pollAnswer(ctx, &googleapi.Error{Code: 503, Body: "{}", Header: http.Header{}}); !got.Failure {
		t.Errorf("poll answered 503: %+v, want a failure", got)
	}
}

// TestRefusedNotSent: through the generated client (cloud.NewGCE), a call
// the gate refuses returns its error and reaches no server: server errors
// open the breaker; a bucket's group is shared by its actions.
func TestRefusedNotSent(t *testing.T) {
	var hits atomic.Int64
	status := atomic.Int64{}
	status.Store(http.StatusServiceUnavailable)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(int(status.Load()))
		_, _ = w.Write([]byte(`{"error":{"code":503,"message":"backend"}}`))
	}))
	defer srv.Close()
	r, m := newLimiter(t, provider.RequestGateConfig{
		Breaker: limiter.BreakerConfig{FailureRatio: 0.5, MinRequests: 2, Interval: time.Minute, OpenTimeout: time.Hour, HalfOpenRequests: 1},
	}, nil)
	ctx := context.Background()
	svc, err := compute.NewService(ctx, option.WithEndpoint(srv.URL+"/compute/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	g := cloud.NewGCE(&cloud.Service{GA: svc, ProjectRouter: &cloud.SingleProjectRouter{ID: "p"}, RateLimiter: r})
	k := meta.ZonalKey("node-1", "us-central1-a")
	for range 2 {
		if _, err := g.Instances().Get(ctx, k); err == nil {
			t.Fatal("a 503 answered no error")
		}
	}
	sent := hits.Load()
	if _, err := g.Instances().Get(ctx, k); err == nil || !limiter.IsOpen(err) {
		t.Fatalf("with the breaker open: %v, want the gate's refusal", err)
	}
	if hits.Load() != sent {
		t.Errorf("a refused call reached the server (%d requests, %d before)", hits.Load(), sent)
	}
	if got := count(t, m, "cloudgate_cloud_requests_refused_total", map[string]string{"action": "instances.get", "reason": "breaker_open"}); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
	if r.Pending() != 0 {
		t.Errorf("pending %d", r.Pending())
	}

	// One token for the read group: instances.get spends it, zones.get
	// (same group) waits and is refused, instances.list (list group) is not.
	status.Store(http.StatusOK)
	r2, m2 := newLimiter(t, provider.RequestGateConfig{
		Bucket:      func(string, string) limiter.BucketConfig { return limiter.BucketConfig{QPS: 0.001, Burst: 1} },
		WaitTimeout: 50 * time.Millisecond,
	}, nil)
	read := &cloud.RateLimitKey{Service: "Zones", Operation: "Get"}
	if err := r2.Accept(ctx, key("Instances", "Get")); err != nil {
		t.Fatal(err)
	}
	if err := r2.Accept(ctx, read); err == nil {
		t.Error("zones.get got a token the read group does not have")
	}
	if err := r2.Accept(ctx, key("Instances", "List")); err != nil {
		t.Errorf("instances.list (list group): %v", err)
	}
	if got := count(t, m2, "cloudgate_cloud_requests_refused_total", map[string]string{"action": "zones.get", "reason": "no_token"}); got != 1 {
		t.Errorf("refused zones.get = %v, want 1", got)
	}
}
