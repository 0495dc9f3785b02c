package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cloudgate/cloudgate/internal/recorder"
	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/metrics"
)

// TestMethodQPSChainedWithFamily: methods.<m>.qps means the same with and
// without a fleet: the method's calls take a token from the method's own
// bucket, then one from its family's (this process's bucket, or the fleet's
// budget), so the method is capped within its family's quota and never
// adds to it.
func TestMethodQPSChainedWithFamily(t *testing.T) {
	const methods = "methods:\n  InstanceMetadata: {qps: 100, burst: 10}\n"
	for _, mode := range []string{"local", "fleet"} {
		t.Run(mode, func(t *testing.T) {
			yaml := "upstream: {name: fake}\nlimits:\n  read: {qps: 1, burst: 2}\n" + methods
			if mode == "fleet" {
				yaml = fleetConfigYAML(fleettest.Start(t), "acct-methodqps", 1) + methods
			}
			cfg, err := LoadConfig(strings.NewReader(yaml))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Metrics = metrics.New()
			cfg.Clock = newFakeClock() // the local buckets never refill
			c := mustNew(t, newCountingCloud(), cfg)
			defer func() { _ = c.(interface{ Close() error }).Close() }()
			g := enf(c)
			family := g.methods["InstanceExists"].bucket // the read family's own
			chain, ok := g.methods["InstanceMetadata"].bucket.(limiter.Chain)
			if !ok || len(chain) != 2 || chain[1] != family {
				t.Fatalf("InstanceMetadata's limiter is a %T, want the method's bucket chained with the read family's (%T)", g.methods["InstanceMetadata"].bucket, family)
			}
			if g.methods["InstanceMetadata"].bucketName != "InstanceMetadata" {
				t.Errorf("bucket name %q, want the method's", g.methods["InstanceMetadata"].bucketName)
			}
			fb, local := family.(*limiter.Bucket)
			if mode == "local" != local {
				t.Fatalf("%s mode: the read family's limiter is a %T", mode, family)
			}
			if !local {
				return
			}
			// The family's two tokens go to two calls of the method.
			for range 2 {
				if err := chain.Wait(context.Background(), limiter.PriorityNormal); err != nil {
					t.Fatal(err)
				}
			}
			if tk := fb.Tokens(); tk >= 1 {
				t.Fatalf("the read family's bucket has %v tokens after two calls of a method with a bucket of its own; want them taken", tk)
			}
		})
	}
}

// TestShadowMethodQPSChainedWithFamily: shadow mode predicts the same
// limiter as enforce mode for a method with a bucket of its own: its
// would-be call takes the method's token, then the family's, so with the
// family's one token spent the next call would wait for the family.
func TestShadowMethodQPSChainedWithFamily(t *testing.T) {
	cfg := shadowConfig(newFakeClock())
	cfg.Limits.Read = BucketConfig{QPS: 1, Burst: 1, WaitTimeout: dur(500 * time.Millisecond)}
	cfg.Methods = map[string]MethodConfig{"InstanceMetadata": {QPS: 100, Burst: 10}}
	c := mustNew(t, newCountingCloud(), cfg)
	defer func() { _ = c.(interface{ Close() error }).Close() }()
	cl := c.(*cloud)
	sh, ok := cl.r.(*shadow)
	if !ok {
		t.Fatalf("mode shadow built %T, want *shadow", cl.r)
	}
	m := cl.g.m.instanceMetadata
	done, notSent := sh.begin(m)
	if done == nil {
		t.Fatalf("first would-be call not sent (%s) with both buckets full", notSent)
	}
	done(context.Background(), nil)
	if done, notSent = sh.begin(m); done != nil || notSent != recorder.ShadowWaitTimeout {
		t.Fatalf("second would-be call: sent %v, notSent %q; want %q (the family's token is spent, 1 s away > waitTimeout)", done != nil, notSent, recorder.ShadowWaitTimeout)
	}
}
