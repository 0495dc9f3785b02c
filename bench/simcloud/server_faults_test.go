package simcloud

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/provider"
)

func TestErrorRateOneFailsEveryCall(t *testing.T) {
	s := startServer(t, ServerConfig{Faults: Faults{ErrorRate: 1}})
	c := cloudFor(t, s, "")
	cl, _ := c.Clusters()
	lb, _ := c.LoadBalancer()
	for range 10 {
		_, err := cl.ListClusters(context.Background())
		apiError(t, err, http.StatusInternalServerError, CodeInternalError)
	}
	for range 3 {
		_, err := lb.EnsureLoadBalancer(context.Background(), "", service("u1", 80), nil)
		apiError(t, err, http.StatusInternalServerError, CodeInternalError)
	}
	cnt := s.Counters()
	if cnt.Errors[MethodListClusters] != 10 || cnt.Errors[MethodEnsureLoadBalancer] != 3 ||
		cnt.ReadErrors != 10 || cnt.WriteErrors != 3 || cnt.TotalCalls() != 13 {
		t.Fatalf("counters %+v", cnt)
	}
	if len(s.WriteLog()) != 0 || len(s.LoadBalancers()) != 0 {
		t.Fatal("a failed write landed")
	}
	// Faults can be lifted at runtime.
	if err := s.SetFaults(Faults{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.ListClusters(context.Background()); err != nil {
		t.Fatalf("after SetFaults(Faults{}): %v", err)
	}
}

func TestOutageAnswers503(t *testing.T) {
	s := startServer(t, ServerConfig{})
	insts := addInstances(t, s, 1, "node")
	c := cloudFor(t, s, "")
	v2, _ := c.InstancesV2()
	rt, _ := c.Routes()
	if err := s.SetFaults(Faults{Outage: true}); err != nil {
		t.Fatal(err)
	}
	if !s.Faults().Outage {
		t.Fatal("Faults() does not report the outage")
	}
	exists, err := v2.InstanceExists(context.Background(), nodeByName(insts[0].NodeName))
	if exists {
		t.Fatal("exists during outage")
	}
	ae := apiError(t, err, http.StatusServiceUnavailable, CodeServiceUnavailable)
	if !strings.Contains(ae.Message, "service unavailable") {
		t.Fatalf("message %q", ae.Message)
	}
	err = rt.CreateRoute(context.Background(), "", "uid", routeTo("node-00000", "10.0.0.0/24"))
	apiError(t, err, http.StatusServiceUnavailable, CodeServiceUnavailable)
	if cnt := s.Counters(); cnt.TotalErrors() != 2 || len(s.WriteLog()) != 0 {
		t.Fatalf("counters %+v, write log %v", cnt, s.WriteLog())
	}
}

func TestThrottleStormAnswers429WithoutTakingQuota(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 1})
	c := cloudFor(t, s, "")
	cl, _ := c.Clusters()
	if err := s.SetFaults(Faults{ThrottleStorm: true, StormRetryAfter: 2500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		_, err := cl.ListClusters(context.Background())
		ae := apiError(t, err, http.StatusTooManyRequests, CodeTooManyRequests)
		if d, ok := ae.RetryAfter(); !ok || d != 2500*time.Millisecond {
			t.Fatalf("RetryAfter() = %v, %v; want 2.5s", d, ok)
		}
	}
	if err := s.SetFaults(Faults{ThrottleStorm: true}); err != nil {
		t.Fatal(err)
	}
	_, err := cl.ListClusters(context.Background())
	if d, _ := apiError(t, err, 429, CodeTooManyRequests).RetryAfter(); d != DefaultStormRetryAfter {
		t.Fatalf("default storm RetryAfter = %v", d)
	}
	_ = s.SetFaults(Faults{})
	if _, err := cl.ListClusters(context.Background()); err != nil {
		t.Fatalf("the storm took the only token: %v", err)
	}
	if cnt := s.Counters(); cnt.Throttled[MethodListClusters] != 6 || cnt.Calls[MethodListClusters] != 7 {
		t.Fatalf("counters %+v", cnt)
	}
}

func TestTimeoutRateHangsThen504(t *testing.T) {
	s := startServer(t, ServerConfig{HangTimeout: 20 * time.Millisecond, Faults: Faults{TimeoutRate: 1}})
	c := cloudFor(t, s, "")
	cl, _ := c.Clusters()
	_, err := cl.ListClusters(context.Background())
	apiError(t, err, http.StatusGatewayTimeout, CodeGatewayTimeout)
	if cnt := s.Counters(); cnt.Errors[MethodListClusters] != 1 {
		t.Fatalf("counters %+v", cnt)
	}
}

func TestTimeoutRateEndsWhenClientGivesUp(t *testing.T) {
	s := startServer(t, ServerConfig{HangTimeout: time.Hour, Faults: Faults{TimeoutRate: 1}})
	c := cloudFor(t, s, "timeout: 100ms\n")
	cl, _ := c.Clusters()
	_, err := cl.ListClusters(context.Background())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	waitFor(t, "the server to see the client go", func() bool { return s.Counters().Errors[MethodListClusters] == 1 })
}

func TestCloseEndsHangingCalls(t *testing.T) {
	s, err := NewServer(ServerConfig{HangTimeout: time.Hour, Faults: Faults{TimeoutRate: 1}})
	if err != nil {
		t.Fatal(err)
	}
	c := cloudFor(t, s, "timeout: 1h\n")
	cl, _ := c.Clusters()
	done := make(chan error, 1)
	go func() {
		_, err := cl.ListClusters(context.Background())
		done <- err
	}()
	waitFor(t, "the call to arrive", func() bool { return s.Counters().TotalCalls() == 1 })
	s.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("hanging call succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end the hanging call")
	}
	s.Close() // idempotent
}

// outcomes runs n sequential reads and records each HTTP status (200 ok).
func outcomes(t *testing.T, seed int64, n int) []int {
	t.Helper()
	s := startServer(t, ServerConfig{Seed: seed, Faults: Faults{ErrorRate: 0.5}})
	c := cloudFor(t, s, "")
	cl, _ := c.Clusters()
	out := make([]int, n)
	for i := range out {
		_, err := cl.ListClusters(context.Background())
		out[i] = http.StatusOK
		if err != nil {
			out[i] = apiError(t, err, http.StatusInternalServerError, CodeInternalError).StatusCode
		}
	}
	return out
}

func TestSeededFaultsAreReproducible(t *testing.T) {
	a, b, other := outcomes(t, 42, 64), outcomes(t, 42, 64), outcomes(t, 43, 64)
	failures := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 42 runs differ at call %d: %v vs %v", i, a, b)
		}
		if a[i] != http.StatusOK {
			failures++
		}
	}
	if failures == 0 || failures == len(a) {
		t.Fatalf("ErrorRate 0.5 failed %d of %d calls", failures, len(a))
	}
	same := true
	for i := range a {
		same = same && a[i] == other[i]
	}
	if same {
		t.Fatal("seeds 42 and 43 gave the same outcomes")
	}
}

func TestSpikesAndLatencyStillServe(t *testing.T) {
	s := startServer(t, ServerConfig{
		BaseLatency: time.Millisecond, Jitter: time.Millisecond,
		Faults: Faults{SpikeRate: 1, SpikeLatency: 2 * time.Millisecond},
	})
	c := cloudFor(t, s, "")
	cl, _ := c.Clusters()
	for range 5 {
		if _, err := cl.ListClusters(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if cnt := s.Counters(); cnt.Calls[MethodListClusters] != 5 || cnt.TotalErrors() != 0 {
		t.Fatalf("counters %+v", cnt)
	}
}

func TestSetFaultsValidates(t *testing.T) {
	s := startServer(t, ServerConfig{})
	for field, f := range map[string]Faults{
		"ErrorRate":       {ErrorRate: 1.5},
		"TimeoutRate":     {TimeoutRate: -0.1},
		"SpikeRate":       {SpikeRate: 2},
		"SpikeLatency":    {SpikeLatency: -1},
		"StormRetryAfter": {StormRetryAfter: -1},
	} {
		err := s.SetFaults(f)
		if err == nil || !strings.Contains(err.Error(), "Faults."+field) {
			t.Errorf("SetFaults(%+v) = %v, want an error naming %s", f, err, field)
		}
	}
	if s.Faults() != (Faults{}) {
		t.Fatalf("an invalid SetFaults changed the faults: %+v", s.Faults())
	}
}

// TestAmbiguousWriteLandsThenFails: with AmbiguousRate 1 every write is
// applied (in the write log and the state) and answered as a failure;
// reads are not affected.
func TestAmbiguousWriteLandsThenFails(t *testing.T) {
	s := startServer(t, ServerConfig{Faults: Faults{AmbiguousRate: 1}, HangTimeout: 50 * time.Millisecond})
	c := cloudFor(t, s, "")
	lb, _ := c.LoadBalancer()
	cl, _ := c.Clusters()
	for range 6 {
		_, err := lb.EnsureLoadBalancer(context.Background(), "", service("u1", 80), nil)
		var ae *APIError
		if !errors.As(err, &ae) || (ae.StatusCode != http.StatusInternalServerError && ae.StatusCode != http.StatusGatewayTimeout) {
			t.Fatalf("ambiguous write answered %v, want 500 or 504", err)
		}
	}
	if _, err := cl.ListClusters(context.Background()); err != nil {
		t.Fatalf("a read failed under AmbiguousRate: %v", err)
	}
	log := s.WriteLog()
	if len(log) != 6 || len(s.LoadBalancers()) != 1 {
		t.Fatalf("%d writes landed, %d LBs; want 6 and 1", len(log), len(s.LoadBalancers()))
	}
	if cnt := s.Counters(); cnt.Ambiguous[MethodEnsureLoadBalancer] != 6 || cnt.WriteErrors != 6 {
		t.Fatalf("counters %+v", cnt)
	}
	if err := s.SetFaults(Faults{ErrorRate: 0.6, AmbiguousRate: 0.6}); err == nil {
		t.Fatal("ErrorRate + AmbiguousRate > 1 accepted")
	}
}

// TestHideInstanceOnce: the next lookup of a live instance answers "not
// found" once, whichever way it is looked up; then the truth again.
func TestHideInstanceOnce(t *testing.T) {
	s := startServer(t, ServerConfig{})
	insts := addInstances(t, s, 3, "node")
	c := cloudFor(t, s, "")
	v2, _ := c.InstancesV2()
	node := nodeByProviderID(insts[0].NodeName, insts[0].ProviderID())
	if !s.HideInstanceOnce(insts[0].ID) || s.HideInstanceOnce("i-missing") {
		t.Fatal("HideInstanceOnce: wrong existence report")
	}
	if _, ok := s.HiddenAnsweredAt(insts[0].ID); ok {
		t.Fatal("answered before any lookup")
	}
	if ok, err := v2.InstanceExists(context.Background(), node); ok || err != nil {
		t.Fatalf("first lookup: %v, %v; want false, nil", ok, err)
	}
	if _, ok := s.HiddenAnsweredAt(insts[0].ID); !ok {
		t.Fatal("HiddenAnsweredAt does not report the answer")
	}
	if ok, err := v2.InstanceExists(context.Background(), node); !ok || err != nil {
		t.Fatalf("second lookup: %v, %v; want true, nil", ok, err)
	}
	// In a list page the hidden instance is left out, once.
	s.HideInstanceOnce(insts[1].ID)
	lister := v2.(interface {
		ListInstances(context.Context, string) ([]provider.InstanceRecord, string, error)
	})
	page, _, err := lister.ListInstances(context.Background(), "")
	if err != nil || len(page) != 2 {
		t.Fatalf("list: %d records, %v; want 2", len(page), err)
	}
	if s.Counters().HiddenAnswers != 2 {
		t.Fatalf("HiddenAnswers %d, want 2", s.Counters().HiddenAnswers)
	}
}
