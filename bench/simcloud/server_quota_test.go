package simcloud

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/cloud-provider/api"
)

// negligibleQPS refills one token per 1000 s: no token comes back during a
// test, so counts are exact.
const negligibleQPS = 0.001

func TestReadQuotaBurstGivesExactThrottleCounts(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 10})
	insts := addInstances(t, s, 1, "node")
	c := cloudFor(t, s, "")
	v2, _ := c.InstancesV2()
	node := nodeByProviderID(insts[0].NodeName, insts[0].ProviderID())

	var okCount, throttled int
	for i := range 25 {
		exists, err := v2.InstanceExists(context.Background(), node)
		if err == nil {
			if !exists {
				t.Fatalf("call %d: exists = false, want true", i)
			}
			okCount++
			continue
		}
		if exists {
			t.Fatalf("call %d: exists = true with error %v", i, err)
		}
		ae := apiError(t, err, http.StatusTooManyRequests, CodeTooManyRequests)
		if msg := err.Error(); !strings.Contains(msg, "429") || !strings.Contains(msg, "TooManyRequests") {
			t.Fatalf("Error() = %q, want 429 and TooManyRequests in it", msg)
		}
		d, ok := ae.RetryAfter()
		// The next token is ~1000 s away.
		if !ok || d < 900*time.Second || d > 1000*time.Second {
			t.Fatalf("RetryAfter() = %v, %v; want ~1000s, true", d, ok)
		}
		var re *api.RetryError
		if !errors.As(err, &re) || re.RetryAfter() != d {
			t.Fatalf("errors.As(*api.RetryError) failed or delay differs: %v", err)
		}
		throttled++
	}
	if okCount != 10 || throttled != 15 {
		t.Fatalf("ok=%d throttled=%d, want 10 and 15", okCount, throttled)
	}
	cnt := s.Counters()
	if cnt.Calls[MethodGetInstance] != 25 || cnt.Throttled[MethodGetInstance] != 15 {
		t.Fatalf("Calls=%v Throttled=%v, want GetInstance 25 and 15", cnt.Calls, cnt.Throttled)
	}
	if cnt.ReadCalls != 25 || cnt.ReadThrottled != 15 || cnt.WriteCalls != 0 || cnt.TotalErrors() != 0 {
		t.Fatalf("totals %+v", cnt)
	}

	s.ResetCounters()
	if cnt := s.Counters(); cnt.TotalCalls() != 0 || len(cnt.Calls) != 0 {
		t.Fatalf("after ResetCounters: %+v", cnt)
	}
}

func TestWriteQuotaIsSeparateFromReadQuota(t *testing.T) {
	s := startServer(t, ServerConfig{
		ReadQPS: negligibleQPS, ReadBurst: 2,
		WriteQPS: negligibleQPS, WriteBurst: 3,
	})
	c := cloudFor(t, s, "")
	lb, _ := c.LoadBalancer()
	ctx := context.Background()

	var writeOK, writeThrottled int
	for i := range 5 {
		_, err := lb.EnsureLoadBalancer(ctx, "kubernetes", service("uid-"+strconv.Itoa(i), 80), nil)
		switch {
		case err == nil:
			writeOK++
		default:
			apiError(t, err, http.StatusTooManyRequests, CodeTooManyRequests)
			writeThrottled++
		}
	}
	if writeOK != 3 || writeThrottled != 2 {
		t.Fatalf("writes ok=%d throttled=%d, want 3 and 2", writeOK, writeThrottled)
	}
	// The write bucket is empty; reads still have their own 2 tokens.
	for i := range 3 {
		_, exists, err := lb.GetLoadBalancer(ctx, "kubernetes", service("uid-"+strconv.Itoa(i)))
		if i < 2 && (err != nil || !exists) {
			t.Fatalf("read %d: exists=%v err=%v, want a served read", i, exists, err)
		}
		if i == 2 {
			apiError(t, err, http.StatusTooManyRequests, CodeTooManyRequests)
		}
	}
	cnt := s.Counters()
	if cnt.WriteCalls != 5 || cnt.WriteThrottled != 2 || cnt.ReadCalls != 3 || cnt.ReadThrottled != 1 {
		t.Fatalf("counters %+v", cnt)
	}
	if got := len(s.WriteLog()); got != 3 {
		t.Fatalf("write log has %d records, want 3 (throttled writes never land)", got)
	}
}

func TestThrottledAnswerCarriesRetryAfterHeaders(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: 0.5, ReadBurst: 1})
	get := func() *http.Response {
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v1/clusters", nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	defer http.DefaultClient.CloseIdleConnections()
	if resp := get(); resp.StatusCode != http.StatusOK {
		t.Fatalf("first call: %d", resp.StatusCode)
	}
	resp := get()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second call: %d, want 429", resp.StatusCode)
	}
	ms, err := strconv.ParseInt(resp.Header.Get("X-Retry-After-Ms"), 10, 64)
	if err != nil || ms <= 0 || ms > 2000 {
		t.Fatalf("X-Retry-After-Ms = %q", resp.Header.Get("X-Retry-After-Ms"))
	}
	secs, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64)
	if err != nil || secs != int64(math.Ceil(float64(ms)/1000)) {
		t.Fatalf("Retry-After = %q, want ceil(%d ms) in seconds", resp.Header.Get("Retry-After"), ms)
	}
}

func TestAPIErrorRetryAfterFallsBackToSeconds(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"2"}}}
	e := newAPIError(MethodListRoutes, "r-1", resp, []byte("not json"))
	if d, ok := e.RetryAfter(); !ok || d != 2*time.Second {
		t.Fatalf("RetryAfter() = %v, %v; want 2s, true", d, ok)
	}
	if e.Code != CodeTooManyRequests {
		t.Fatalf("Code = %q, want %q from the status text", e.Code, CodeTooManyRequests)
	}
	resp = &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{}}
	e = newAPIError(MethodListRoutes, "r-2", resp, nil)
	if _, ok := e.RetryAfter(); ok || e.Unwrap() != nil {
		t.Fatalf("a 500 without Retry-After: RetryAfter ok=%v Unwrap=%v", ok, e.Unwrap())
	}
}

func TestZeroQPSIsUnlimited(t *testing.T) {
	s := startServer(t, ServerConfig{ReadBurst: 1, WriteBurst: 1})
	c := cloudFor(t, s, "")
	cl, _ := c.Clusters()
	for range 50 {
		if _, err := cl.ListClusters(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if cnt := s.Counters(); cnt.Calls[MethodListClusters] != 50 || cnt.TotalThrottled() != 0 {
		t.Fatalf("counters %+v", cnt)
	}
}
