package provider

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"

	"github.com/cloudgate/cloudgate/limiter"
)

func TestInstanceMetadataCachedUntilTTL(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	c := mustNew(t, up, testConfig(clk))
	i := v2(t, c)
	ctx := context.Background()
	a, b := testNode("a", "fake://a"), testNode("b", "fake://b")
	for range 3 {
		if _, err := i.InstanceMetadata(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if got := up.Calls("InstanceMetadata"); got != 1 {
		t.Fatalf("upstream calls = %d after 3 reads of one node, want 1", got)
	}
	if _, err := i.InstanceMetadata(ctx, b); err != nil {
		t.Fatal(err)
	}
	if got := up.Calls("InstanceMetadata"); got != 2 {
		t.Fatalf("two nodes shared an entry: upstream calls = %d, want 2", got)
	}
	clk.Step(methodSpecs["InstanceMetadata"].defaultTTL)
	_, _ = i.InstanceMetadata(ctx, a)
	if got := up.Calls("InstanceMetadata"); got != 3 {
		t.Fatalf("upstream calls = %d after TTL, want 3", got)
	}
}

func TestPerMethodTTLOverride(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	cfg := testConfig(clk)
	cfg.Methods = map[string]MethodConfig{"InstanceMetadata": {TTL: durp(time.Second)}}
	i := v2(t, mustNew(t, up, cfg))
	n := testNode("a", "fake://a")
	_, _ = i.InstanceMetadata(context.Background(), n)
	clk.Step(time.Second)
	_, _ = i.InstanceMetadata(context.Background(), n)
	if got := up.Calls("InstanceMetadata"); got != 2 {
		t.Fatalf("upstream calls = %d, want 2 with a 1s TTL", got)
	}
}

// TestCachedResultsAreSafe: the upstream cannot change a cached answer
// after giving it, and results are copies per caller (InstanceMetadata's:
// copies_test.go).
func TestCachedResultsAreSafe(t *testing.T) {
	up := newCountingCloud()
	up.AdditionalLabels = map[string]string{"k": "v"}
	c := mustNew(t, up, testConfig(newFakeClock()))
	i := v2(t, c)
	n := testNode("a", "fake://a")
	m1, _ := i.InstanceMetadata(context.Background(), n)
	up.Addresses[0].Address = "changed by the upstream"
	up.AdditionalLabels["k"] = "changed by the upstream"
	m2, _ := i.InstanceMetadata(context.Background(), n)
	if m2.NodeAddresses[0].Address != "10.0.0.1" || m2.AdditionalLabels["k"] != "v" {
		t.Fatalf("the upstream's later change reached the cache: %+v", m2)
	}
	if len(m1.NodeAddresses) != cap(m1.NodeAddresses) {
		t.Fatalf("shared addresses have room to append in place: len %d cap %d", len(m1.NodeAddresses), cap(m1.NodeAddresses))
	}
	_ = append(m1.NodeAddresses, v1.NodeAddress{Address: "appended"})

	up.Addresses[0].Address = "10.0.0.1"
	inst, _ := c.Instances()
	a1, _ := inst.NodeAddresses(context.Background(), "a")
	a1[0].Address = "corrupted"
	if a2, _ := inst.NodeAddresses(context.Background(), "a"); a2[0].Address != "10.0.0.1" {
		t.Fatalf("a caller's mutation reached the NodeAddresses cache: %+v", a2)
	}
}

func TestInstanceNotFoundIsNegativelyCachedAndExact(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	up.MetadataErr = cloudprovider.InstanceNotFound
	i := v2(t, mustNew(t, up, testConfig(clk)))
	n := testNode("gone", "fake://gone")
	for range 3 {
		if _, err := i.InstanceMetadata(context.Background(), n); err != cloudprovider.InstanceNotFound {
			t.Fatalf("err = %v, want the exact cloudprovider.InstanceNotFound", err)
		}
	}
	if got := up.Calls("InstanceMetadata"); got != 1 {
		t.Fatalf("upstream calls = %d, want 1 (negative entry)", got)
	}
	clk.Step(30 * time.Second) // default negative TTL
	_, _ = i.InstanceMetadata(context.Background(), n)
	if got := up.Calls("InstanceMetadata"); got != 2 {
		t.Fatalf("negative entry outlived its TTL: calls = %d", got)
	}
}

func TestErrorsPassThroughUnchanged(t *testing.T) {
	retry := api.NewRetryError("lb not ready", 7*time.Second)
	wrappedRetry := fmt.Errorf("provisioning: %w", retry)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"NotImplemented", cloudprovider.NotImplemented},
		{"ImplementedElsewhere", cloudprovider.ImplementedElsewhere},
		{"InstanceNotFound", cloudprovider.InstanceNotFound},
		{"RetryError", wrappedRetry},
		{"other", errors.New("boom")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newCountingCloud()
			up.Err = tc.err
			lb, _ := mustNew(t, up, testConfig(newFakeClock())).LoadBalancer()
			_, err := lb.EnsureLoadBalancer(context.Background(), "c", testService("ns", "s", "u1"), nil)
			if err != tc.err {
				t.Fatalf("err = %v, want the upstream's exact value %v", err, tc.err)
			}
			var re *api.RetryError
			if tc.name == "RetryError" && (!errors.As(err, &re) || re.RetryAfter() != 7*time.Second) {
				t.Fatalf("RetryError lost: %v", err)
			}
		})
	}
}

func TestImplFidelity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		disable func(*fake.Cloud)
	}{
		{"all", func(*fake.Cloud) {}},
		{"no instances", func(f *fake.Cloud) { f.DisableInstances = true }},
		{"no routes", func(f *fake.Cloud) { f.DisableRoutes = true }},
		{"no load balancers", func(f *fake.Cloud) { f.DisableLoadBalancers = true }},
		{"no zones", func(f *fake.Cloud) { f.DisableZones = true }},
		{"no clusters", func(f *fake.Cloud) { f.DisableClusters = true }},
		{"no instancesV2", func(f *fake.Cloud) { f.EnableInstancesV2 = false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &fake.Cloud{EnableInstancesV2: true, Provider: "fake"}
			tc.disable(up)
			c := mustNew(t, up, testConfig(nil))
			check := func(what string, gotImpl any, gotOK bool, wantOK bool) {
				t.Helper()
				if gotOK != wantOK {
					t.Errorf("%s: ok = %v, upstream says %v", what, gotOK, wantOK)
				}
				if !wantOK && gotImpl != nil {
					t.Errorf("%s: impl = %#v, want untyped nil", what, gotImpl)
				}
			}
			lb, ok := c.LoadBalancer()
			_, want := up.LoadBalancer()
			check("LoadBalancer", lb, ok, want)
			in, ok := c.Instances()
			_, want = up.Instances()
			check("Instances", in, ok, want)
			iv2, ok := c.InstancesV2()
			_, want = up.InstancesV2()
			check("InstancesV2", iv2, ok, want)
			z, ok := c.Zones()
			_, want = up.Zones()
			check("Zones", z, ok, want)
			cl, ok := c.Clusters()
			_, want = up.Clusters()
			check("Clusters", cl, ok, want)
			r, ok := c.Routes()
			_, want = up.Routes()
			check("Routes", r, ok, want)
			if c.ProviderName() != "fake" || c.HasClusterID() != up.HasClusterID() {
				t.Errorf("ProviderName/HasClusterID not passed through")
			}
		})
	}
}

// withInformers is an upstream that implements InformerUser.
type withInformers struct {
	*fake.Cloud
	called bool
}

func (w *withInformers) SetInformers(informers.SharedInformerFactory) { w.called = true }

func TestOptionalInterfacesMirrored(t *testing.T) {
	plain := mustNew(t, &fake.Cloud{}, testConfig(nil))
	if _, ok := plain.(cloudprovider.InformerUser); ok {
		t.Fatal("wrapper claims InformerUser though the upstream does not implement it")
	}
	up := &withInformers{Cloud: &fake.Cloud{}}
	wrapped := mustNew(t, up, testConfig(nil))
	iu, ok := wrapped.(cloudprovider.InformerUser)
	if !ok {
		t.Fatal("wrapper hides the upstream's InformerUser")
	}
	iu.SetInformers(nil)
	if !up.called {
		t.Fatal("SetInformers did not reach the upstream")
	}
}

func TestProviderNameOverride(t *testing.T) {
	cfg := testConfig(nil)
	cfg.ProviderName = "renamed"
	if got := mustNew(t, &fake.Cloud{Provider: "fake"}, cfg).ProviderName(); got != "renamed" {
		t.Fatalf("ProviderName = %q", got)
	}
}

func TestWritesInvalidateReadsAndAreNeverCached(t *testing.T) {
	up := newCountingCloud()
	c := mustNew(t, up, testConfig(newFakeClock()))
	lb, _ := c.LoadBalancer()
	ctx := context.Background()
	svc, other := testService("ns", "web", "u1"), testService("ns", "api", "u2")
	get := func(s *v1.Service) {
		if _, _, err := lb.GetLoadBalancer(ctx, "c", s); err != nil {
			t.Fatal(err)
		}
	}
	get(svc)
	get(svc)
	get(other)
	if got := up.Calls("GetLoadBalancer"); got != 2 {
		t.Fatalf("GetLoadBalancer upstream calls = %d, want 2 (one per service)", got)
	}
	for range 2 {
		if _, err := lb.EnsureLoadBalancer(ctx, "c", svc, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := up.Calls("EnsureLoadBalancer"); got != 2 {
		t.Fatalf("identical writes were merged: %d upstream calls, want 2", got)
	}
	get(svc)
	get(other)
	if got := up.Calls("GetLoadBalancer"); got != 3 {
		t.Fatalf("GetLoadBalancer calls = %d, want 3: the write invalidates its own service only", got)
	}
	if err := lb.UpdateLoadBalancer(ctx, "c", svc, nil); err != nil {
		t.Fatal(err)
	}
	get(svc)
	if got := up.Calls("GetLoadBalancer"); got != 4 {
		t.Fatalf("UpdateLoadBalancer did not invalidate: calls = %d", got)
	}

	rt, _ := c.Routes()
	_, _ = rt.ListRoutes(ctx, "c")
	_, _ = rt.ListRoutes(ctx, "c")
	if got := up.Calls("ListRoutes"); got != 1 {
		t.Fatalf("ListRoutes calls = %d, want 1", got)
	}
	if err := rt.CreateRoute(ctx, "c", "hint", &cloudprovider.Route{TargetNode: "n1", DestinationCIDR: "10.1.0.0/24"}); err != nil {
		t.Fatal(err)
	}
	routes, _ := rt.ListRoutes(ctx, "c")
	if got := up.Calls("ListRoutes"); got != 2 || len(routes) != 1 {
		t.Fatalf("after CreateRoute: ListRoutes calls = %d, routes = %d; want 2 and 1", got, len(routes))
	}
}

func TestSingleflightManyGoroutines(t *testing.T) {
	up := newCountingCloud()
	up.block = make(chan struct{})
	i := v2(t, mustNew(t, up, testConfig(newFakeClock())))
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := i.InstanceMetadata(context.Background(), testNode("a", "fake://a"))
			errs <- err
		}()
	}
	waitUntil(t, "the first upstream call", func() bool { return up.Calls("InstanceMetadata") == 1 })
	time.Sleep(10 * time.Millisecond) // let the others queue behind it (correctness does not depend on it)
	close(up.block)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := up.Calls("InstanceMetadata"); got != 1 {
		t.Fatalf("upstream calls = %d for %d concurrent identical reads, want 1", got, n)
	}
}

func TestLimiterWaitHonoursContext(t *testing.T) {
	up := newCountingCloud()
	cfg := testConfig(nil)
	cfg.Limits.Read = BucketConfig{QPS: 0.001, Burst: 1}
	i := v2(t, mustNew(t, up, cfg))
	if _, err := i.InstanceExists(context.Background(), testNode("a", "fake://a")); err != nil {
		t.Fatal(err) // the burst token
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	exists, err := i.InstanceExists(ctx, testNode("b", "fake://b"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a wrapped context.DeadlineExceeded", err)
	}
	if errors.Is(err, cloudprovider.InstanceNotFound) || exists {
		t.Fatalf("a limited call looked like an answer: exists=%v err=%v", exists, err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the wait did not end with the context")
	}
	if got := up.Calls("InstanceExists"); got != 1 {
		t.Fatalf("upstream calls = %d, want 1: a cancelled wait must not call upstream", got)
	}

	cancelled, cancelNow := context.WithCancel(context.Background())
	cancelNow()
	if _, err := i.InstanceExists(cancelled, testNode("c", "fake://c")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestWritesDoNotQueueBehindReads(t *testing.T) {
	up := newCountingCloud()
	cfg := testConfig(nil)
	cfg.Limits.Read = BucketConfig{QPS: 0.001, Burst: 1}
	c := mustNew(t, up, cfg)
	i := v2(t, c)
	_, _ = i.InstanceExists(context.Background(), testNode("a", "fake://a")) // drain the read bucket
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for n := range 20 { // a queue of background reads
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = i.InstanceExists(ctx, testNode(fmt.Sprint("q", n), fmt.Sprint("fake://q", n)))
		}()
	}
	lb, _ := c.LoadBalancer()
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := lb.EnsureLoadBalancer(wctx, "c", testService("ns", "s", "u"), nil); err != nil {
		t.Fatalf("write starved behind reads: %v", err)
	}
	cancel()
	wg.Wait()
}

func TestThrottlingIsAnErrorNeverNotFound(t *testing.T) {
	up := newCountingCloud()
	throttle := &throttleErr{}
	up.ErrByProviderID = throttle
	up.ExistsByProviderID = false
	cfg := testConfig(nil)
	i := v2(t, mustNew(t, up, cfg))
	exists, err := i.InstanceExists(context.Background(), testNode("a", "fake://a"))
	if err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Fatalf("a throttled InstanceExists answered exists=%v err=%v; want an error that is not InstanceNotFound", exists, err)
	}
	// Throttling is not cached: the next call goes upstream again.
	_, _ = i.InstanceExists(context.Background(), testNode("a", "fake://a"))
	if got := up.Calls("InstanceExists"); got != 2 {
		t.Fatalf("a throttled answer was cached: calls = %d", got)
	}
}

type throttleErr struct{}

func (*throttleErr) Error() string                     { return "HTTP 429 TooManyRequests" }
func (*throttleErr) RetryAfter() (time.Duration, bool) { return 0, true }

func TestBreakerOpenStaleHalfOpenClosed(t *testing.T) {
	clk := newFakeClock()
	up := newCountingCloud()
	cfg := testConfig(clk)
	cfg.Breaker = BreakerConfig{FailureRatio: 0.5, MinRequests: 4, Interval: dur(time.Minute), OpenTimeout: dur(50 * time.Millisecond), HalfOpenRequests: 1, WaitForProbe: boolp(false)}
	c, i, cached := withStaleMetadata(t, up, clk, cfg) // expired but within staleIfError
	ctx := context.Background()

	outage := errors.New("HTTP 503 service unavailable")
	up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) { return nil, outage }
	for n := range 4 {
		_, _ = i.InstanceMetadata(ctx, testNode(fmt.Sprint("n", n), fmt.Sprint("fake://n", n)))
	}
	breaker := enf(c).breakers[familyRead]
	if breaker.State() != limiter.StateOpen {
		t.Fatalf("breaker = %v after 4/4 failures, want open", breaker.State())
	}
	calls := up.Calls("InstanceMetadata")

	// Open: a read with a stale-enough entry is served from it...
	m, err := i.InstanceMetadata(ctx, cached)
	if err != nil || m.Zone != "zone-a" {
		t.Fatalf("stale read = %+v, %v; want the cached metadata", m, err)
	}
	// ...one without fails fast with the breaker's error wrapping the outage.
	_, err = i.InstanceMetadata(ctx, testNode("new", "fake://new"))
	if !limiter.IsOpen(err) || !errors.Is(err, outage) {
		t.Fatalf("err = %v, want a breaker-open error wrapping the last upstream error", err)
	}
	exists, err := i.InstanceExists(ctx, testNode("new", "fake://new"))
	if err == nil || exists || errors.Is(err, cloudprovider.InstanceNotFound) {
		t.Fatalf("breaker-open InstanceExists = %v, %v; want an error", exists, err)
	}
	rt, _ := c.Routes()
	if routes, err := rt.ListRoutes(ctx, "other"); err == nil {
		t.Fatalf("breaker-open ListRoutes returned %d routes and no error", len(routes))
	}
	if up.Calls("InstanceMetadata") != calls {
		t.Fatal("an open breaker let a call through")
	}
	lb, _ := c.LoadBalancer()
	if _, err := lb.EnsureLoadBalancer(ctx, "c", testService("ns", "s", "u"), nil); err != nil {
		t.Fatalf("the write family's breaker must be independent: %v", err)
	}

	// Half-open after OpenTimeout; a successful probe closes it.
	up.metadataHook = nil
	clk.Step(50 * time.Millisecond) // OpenTimeout at most, on the gate's clock
	if s := breaker.State(); s != limiter.StateHalfOpen {
		t.Fatalf("breaker = %v after OpenTimeout, want half-open", s)
	}
	if _, err := i.InstanceMetadata(ctx, testNode("probe", "fake://probe")); err != nil {
		t.Fatalf("probe: %v", err)
	}
	if breaker.State() != limiter.StateClosed {
		t.Fatalf("breaker = %v after a good probe, want closed", breaker.State())
	}
}

func TestNotFoundDoesNotTripBreaker(t *testing.T) {
	up := newCountingCloud()
	up.MetadataErr = cloudprovider.InstanceNotFound
	cfg := testConfig(nil)
	cfg.Breaker.MinRequests = 2
	c := mustNew(t, up, cfg)
	i := v2(t, c)
	for n := range 20 {
		_, _ = i.InstanceMetadata(context.Background(), testNode(fmt.Sprint("n", n), ""))
	}
	if s := enf(c).breakers[familyRead].State(); s != limiter.StateClosed {
		t.Fatalf("breaker = %v after only not-found answers, want closed", s)
	}
}
