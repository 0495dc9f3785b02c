package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/metrics"
)

// fleetConfigYAML is a cloudgate.yaml of a fleet member on r's account.
func fleetConfigYAML(r *fleettest.Redis, account string, readQPS float64) string {
	return fmt.Sprintf(`upstream: {name: fake}
limits:
  read:  {qps: %v, burst: 5}
  write: {qps: 100, burst: 10}
  shared:
    redis: {address: %q, passwordFile: %q}
    account: %s
    redisTimeout: 200ms
`, readQPS, r.Addr, r.PasswordFile, account)
}

// TestFleetConfigThroughProvider: with limits.shared, two cloudgates in one
// account draw their reads from one budget on a real redis-server: together
// they stay within the account's quota over the window, and each gets
// through. Close leaves the fleet (goleak in TestMain checks its goroutines
// stop).
func TestFleetConfigThroughProvider(t *testing.T) {
	r := fleettest.Start(t)
	const quota, window = 20.0, 2 * time.Second
	ups := []*countingCloud{newCountingCloud(), newCountingCloud()}
	var clouds []interface{ Close() error }
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	for i, up := range ups {
		cfg, err := LoadConfig(strings.NewReader(fleetConfigYAML(r, "acct-provider", quota)))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Metrics = metrics.New()
		cfg.Cache.Size = 1 // every read a distinct key: each one reaches the upstream
		c := mustNew(t, up, cfg)
		clouds = append(clouds, c.(interface{ Close() error }))
		if _, ok := enf(c).methods["InstanceExists"].bucket.(*limiter.Bucket); ok {
			t.Fatal("limits.shared set but the read family has a local bucket")
		}
		in := v2(t, c)
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ctx.Err() == nil; n++ {
					node := testNode(fmt.Sprintf("m%d-w%d-n%d", i, w, n), fmt.Sprintf("fake://m%d-w%d-n%d", i, w, n))
					_, _ = in.InstanceExists(ctx, node)
				}
			}()
		}
	}
	wg.Wait()
	a, b := ups[0].Calls("InstanceExists"), ups[1].Calls("InstanceExists")
	t.Logf("upstream reads in %v: member A %d, member B %d (account quota %v/s)", window, a, b, quota)
	// The window plus the fleet's initial bursts (one per member) and the
	// script's batch of tokens: a generous bound that a doubled quota (two
	// local buckets at the full rate each) still breaks.
	if limit := quota*window.Seconds()*1.25 + 2*5; float64(a+b) > limit {
		t.Errorf("%d upstream reads in %v: over the shared quota (%v/s, bound %v)", a+b, window, quota, limit)
	}
	if a == 0 || b == 0 {
		t.Errorf("a member got no reads through (A %d, B %d)", a, b)
	}
	for _, c := range clouds {
		_ = c.Close()
	}
}

// TestFleetConfigErrorsNameTheField: limits.shared is validated with the
// rest of the config.
func TestFleetConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"upstream: {name: fake}\nlimits: {shared: {redis: {address: \"127.0.0.1:1\"}}}\n", "limits.shared.account"},
		{"upstream: {name: fake}\nlimits: {shared: {account: a}}\n", "limits.shared.redis.address"},
		{"upstream: {name: fake}\nlimits: {shared: {account: a, redis: {address: \"127.0.0.1:1\"}, weight: -1}}\n", "limits.shared.weight"},
	} {
		_, err := LoadConfig(strings.NewReader(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadConfig(%q) = %v, want an error naming %s", tc.yaml, err, tc.want)
		}
	}
}

// fakeClientBuilder hands out one (fake) clientset.
type fakeClientBuilder struct{ c kubernetes.Interface }

func (b fakeClientBuilder) Config(string) (*restclient.Config, error) {
	return &restclient.Config{}, nil
}
func (b fakeClientBuilder) ConfigOrDie(string) *restclient.Config       { return &restclient.Config{} }
func (b fakeClientBuilder) Client(string) (kubernetes.Interface, error) { return b.c, nil }
func (b fakeClientBuilder) ClientOrDie(string) kubernetes.Interface     { return b.c }

// TestFleetFallbackEvents: a member that falls back when Redis dies, and
// rejoins when it is back, reports both as Kubernetes Events in kube-system
// on the kube-system Namespace, without the Redis password.
func TestFleetFallbackEvents(t *testing.T) {
	r := fleettest.Start(t)
	cfg, err := LoadConfig(strings.NewReader(fleetConfigYAML(r, "acct-events", 20) + "    heartbeat: 50ms\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = metrics.New()
	c := mustNew(t, newCountingCloud(), cfg)
	defer c.(interface{ Close() error }).Close()
	kc := fake.NewClientset()
	stop := make(chan struct{})
	defer close(stop)
	c.Initialize(fakeClientBuilder{kc}, stop)
	g := enf(c)

	events := func() []eventsv1.Event {
		l, err := kc.EventsV1().Events("kube-system").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(l.Items, func(i, j int) bool { return l.Items[i].Name < l.Items[j].Name }) // kube-system.<hex ns>
		return l.Items
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	r.Kill()
	waitFor("fallback", g.fleet.Fallback)
	r.Restart()
	waitFor("rejoin", func() bool { return !g.fleet.Fallback() })
	waitFor("two Events", func() bool { return len(events()) >= 2 })
	evs := events()
	want := []struct{ reason, typ string }{{"CloudgateRedisFallback", corev1.EventTypeWarning}, {"CloudgateRedisRejoined", corev1.EventTypeNormal}}
	for i, w := range want {
		e := evs[i]
		if e.Reason != w.reason || e.Type != w.typ {
			t.Errorf("Event %d: %s/%s, want %s/%s", i, e.Reason, e.Type, w.reason, w.typ)
		}
		if e.Regarding.Kind != "Namespace" || e.Regarding.Name != "kube-system" || e.Namespace != "kube-system" {
			t.Errorf("Event %d on %+v in %q, want the kube-system Namespace", i, e.Regarding, e.Namespace)
		}
		if e.ReportingController != "cloudgate" || e.Action == "" || e.EventTime.IsZero() {
			t.Errorf("Event %d: reporting controller %q, action %q, time %v: want cloudgate's, set", i, e.ReportingController, e.Action, e.EventTime)
		}
		if !strings.Contains(e.Note, "acct-events") || !strings.Contains(e.Note, g.fleet.Member()) || strings.Contains(e.Note, r.Password) {
			t.Errorf("Event %d note %q: want the account and the member, never the password", i, e.Note)
		}
	}
}
