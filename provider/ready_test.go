package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

// TestReady: a replica's readiness (lazyCloud.Ready, served as /readyz by cmd/ccm) with
// limits.shared on a real redis-server, asked before Initialize as in a standby: in
// failureMode closed it is nil while Redis answers and an error naming the field, the
// Redis address and the fix while Redis is down, nil again once it is back; in
// failureMode open (explicit or the default) and without limits.shared it is nil with Redis down (such a member serves its floor, or has no fleet). The replica
// never joins the fleet to answer it.
func TestReady(t *testing.T) {
	r := fleettest.Start(t)
	ctx := context.Background()
	shared := func(extra string) string {
		return strings.Replace(fleetConfigYAML(r, "acct-ready", 10), "    redisTimeout: 200ms\n", "    redisTimeout: 200ms\n"+extra, 1)
	}
	closed := newReplica(t, shared("    failureMode: closed\n"))
	if err := closed.cloud.Ready(ctx); err != nil {
		t.Fatalf("failureMode closed, Redis up: %v", err)
	}
	if n := len(members(t, r, "acct-ready")); n != 0 {
		t.Errorf("%d members registered after a readiness check; a standby must not join the fleet", n)
	}
	others := map[string]replica{
		"failureMode open":    newReplica(t, shared("    failureMode: open\n")),
		"failureMode default": newReplica(t, shared("")),
		"no limits.shared":    newReplica(t, "upstream: {name: fake}\n"),
	}

	r.Kill()
	err := closed.cloud.Ready(ctx)
	for _, want := range []string{"limits.shared.failureMode", "closed", r.Addr, "failureMode: open"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("failureMode closed, Redis down: %v, want an error naming %q", err, want)
		}
	}
	t.Logf("failureMode closed, Redis down: %v", err)
	for name, rep := range others {
		if err := rep.cloud.Ready(ctx); err != nil {
			t.Errorf("%s, Redis down: %v, want ready", name, err)
		}
	}

	r.Restart()
	if err := closed.cloud.Ready(ctx); err != nil {
		t.Errorf("failureMode closed, Redis back: %v", err)
	}
	_ = closed.cloud.Close()
	if err := closed.cloud.Ready(ctx); err == nil {
		t.Error("Ready after Close: nil, want an error")
	}
}
