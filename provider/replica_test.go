package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/metrics"
)

// replica is one CCM replica's cloud as the registered factory builds it
// (the CCM builds it in every replica), with its own metrics registry, as
// each replica process has its own /metrics.
type replica struct {
	cloud *lazyCloud
	reg   *prometheus.Registry
}

func newReplica(t *testing.T, yaml string) replica {
	t.Helper()
	c, err := newFromConfig(strings.NewReader(yaml))
	if err != nil {
		t.Fatal(err)
	}
	l := c.(*lazyCloud)
	l.cfg.Metrics = metrics.New()
	reg := prometheus.NewRegistry()
	if err := l.cfg.Metrics.Register(reg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return replica{cloud: l, reg: reg}
}

// gauge sums the samples of the named gauge whose labels include match.
func (r replica) gauge(t *testing.T, name string, match map[string]string) (sum float64, series int) {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m.GetLabel(), match) {
				sum += m.GetGauge().GetValue()
				series++
			}
		}
	}
	return sum, series
}

func labelsMatch(ls []*dto.LabelPair, match map[string]string) bool {
	n := 0
	for _, l := range ls {
		if v, ok := match[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(match)
}

// cloudgateSeries counts the cloudgate_ series r exports.
func (r replica) cloudgateSeries(t *testing.T) int {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "cloudgate_") {
			n += len(mf.GetMetric())
		}
	}
	return n
}

// members lists the fleet members registered in Redis for account.
func members(t *testing.T, r *fleettest.Redis, account string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := r.Admin().HKeys(ctx, "cloudgate:{"+account+"}:weights").Result()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}

// clusterBuilder is a client builder whose cluster's kube-system Namespace
// has the given UID ("" for none: the Namespace cannot be read).
func clusterBuilder(uid string) fakeClientBuilder {
	if uid == "" {
		return fakeClientBuilder{fake.NewClientset()}
	}
	return fakeClientBuilder{fake.NewClientset(&corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: types.UID(uid)},
	})}
}

// TestReplicaJoinsOnlyWhileLeading: the CCM builds the cloud in both
// replicas and asks each HasClusterID and ProviderName, but calls Initialize
// only in the leader. Before Initialize no replica is in the fleet or
// exports a cloudgate series; after it, exactly the leader is, as the
// cluster's member, with the whole read quota as its share (not half); so
// the sum over the replicas' /metrics — what a dashboard adds up — equals
// one replica's. The standby taking over keeps one member, the cluster's.
func TestReplicaJoinsOnlyWhileLeading(t *testing.T) {
	r := fleettest.Start(t)
	const account, qps = "acct-replicas", 10.0
	yaml := strings.Replace(fleetConfigYAML(r, account, qps), "upstream: {name: fake}", "upstream: {name: "+testUpstream+"}", 1) +
		"    heartbeat: 50ms\n"
	a, b := newReplica(t, yaml), newReplica(t, yaml)
	for _, rep := range []replica{a, b} {
		if !rep.cloud.HasClusterID() || rep.cloud.ProviderName() != testUpstream {
			t.Fatalf("HasClusterID/ProviderName not the upstream's: %v %q", rep.cloud.HasClusterID(), rep.cloud.ProviderName())
		}
	}
	checks := 0
	check := func(cond bool, format string, args ...any) {
		t.Helper()
		checks++
		if !cond {
			t.Errorf(format, args...)
		}
	}
	for i, rep := range []replica{a, b} {
		check(rep.cloud.built() == nil, "replica %d built cloudgate before Initialize", i)
		check(rep.cloudgateSeries(t) == 0, "replica %d exports %d cloudgate series before leading", i, rep.cloudgateSeries(t))
	}
	check(len(members(t, r, account)) == 0, "members before any replica leads: %v", members(t, r, account))

	const uid = "5f0c8a1e-0000-4000-8000-000000000001"
	stopA := make(chan struct{})
	a.cloud.Initialize(clusterBuilder(uid), stopA)
	defer close(stopA)
	want := []string{"cluster-" + uid}
	check(fmt.Sprint(members(t, r, account)) == fmt.Sprint(want), "members with A leading: %v, want %v", members(t, r, account), want)
	check(b.cloudgateSeries(t) == 0, "standby exports %d cloudgate series", b.cloudgateSeries(t))
	read := map[string]string{"bucket": "read"}
	ca, na := a.gauge(t, "cloudgate_limiter_configured_rate", read)
	cb, _ := b.gauge(t, "cloudgate_limiter_configured_rate", read)
	check(na == 1 && ca+cb == qps, "configured read rate summed over replicas = %v (%d series on the leader), want %v", ca+cb, na, qps)
	// The leader's share: the whole quota, it being the account's only member.
	waitUntil(t, "the leader's share is the whole quota", func() bool {
		s, _ := a.gauge(t, "cloudgate_fleet_share_rate", map[string]string{"family": "read", "account": account})
		return s == qps
	})
	checks++

	// B takes over while A's heartbeat still runs (the renew-deadline
	// overlap), then A goes: one member throughout, the cluster's.
	stopB := make(chan struct{})
	b.cloud.Initialize(clusterBuilder(uid), stopB)
	defer close(stopB)
	check(fmt.Sprint(members(t, r, account)) == fmt.Sprint(want), "members with both initialized: %v, want %v", members(t, r, account), want)
	if err := a.cloud.Close(); err != nil { // deregisters the shared name; B's next heartbeat renews it
		t.Fatal(err)
	}
	waitUntil(t, "B's heartbeat renews the cluster's member", func() bool {
		return fmt.Sprint(members(t, r, account)) == fmt.Sprint(want)
	})
	checks++
	waitUntil(t, "the new leader's share is the whole quota", func() bool {
		s, _ := b.gauge(t, "cloudgate_fleet_share_rate", map[string]string{"family": "read", "account": account})
		m, _ := b.gauge(t, "cloudgate_fleet_members", map[string]string{"account": account})
		return s == qps && m == 1
	})
	checks++
	t.Logf("%d checks", checks)
}

// TestReplicaMemberWithoutNamespace: a cluster whose kube-system Namespace
// cannot be read still joins at Initialize, under a random id.
func TestReplicaMemberWithoutNamespace(t *testing.T) {
	r := fleettest.Start(t)
	const account = "acct-no-ns"
	yaml := strings.Replace(fleetConfigYAML(r, account, 10), "upstream: {name: fake}", "upstream: {name: "+testUpstream+"}", 1)
	a := newReplica(t, yaml)
	stop := make(chan struct{})
	defer close(stop)
	a.cloud.Initialize(clusterBuilder(""), stop)
	m := members(t, r, account)
	if len(m) != 1 || !strings.HasPrefix(m[0], "m-") {
		t.Fatalf("members %v, want one random m-… id", m)
	}
}

// TestReplicaTakesOverDeadLeadersMember: a leader killed without leaving
// the fleet stays registered, fallen, until forgotten, its claim held back
// from the budget. A new leader under the cluster's id renews that member:
// one member, the whole share. Under a random id (the kube-system Namespace
// unreadable) it joins beside the dead one and, the dead leader having
// claimed the whole quota, gets no share until it is forgotten.
func TestReplicaTakesOverDeadLeadersMember(t *testing.T) {
	const uid, qps = "5f0c8a1e-0000-4000-8000-000000000002", 10.0
	for _, tc := range []struct {
		name        string
		readableNS  bool
		wantShare   float64
		wantMembers int
	}{
		{"cluster id", true, qps, 1},
		{"random id", false, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fleettest.Start(t)
			account := "acct-takeover-" + strings.ReplaceAll(tc.name, " ", "-")
			yaml := strings.Replace(fleetConfigYAML(r, account, qps), "upstream: {name: fake}", "upstream: {name: "+testUpstream+"}", 1) +
				"    heartbeat: 50ms\n" // fallen after 150 ms, forgotten after 6 s
			// The dead leader: registered as the cluster's member, claiming
			// the whole quota, last heartbeat 1 s ago.
			ctx := context.Background()
			now, err := r.Admin().Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			dead := "cluster-" + uid
			key := func(k string) string { return "cloudgate:{" + account + "}:" + k }
			if err := r.Admin().HSet(ctx, key("weights"), dead, "1").Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.Admin().ZAdd(ctx, key("heartbeats"), redis.Z{Score: float64(now.UnixMilli() - 1000), Member: dead}).Err(); err != nil {
				t.Fatal(err)
			}
			if err := r.Admin().HSet(ctx, key("claims"), dead, "1").Err(); err != nil {
				t.Fatal(err)
			}
			b := newReplica(t, yaml)
			stop := make(chan struct{})
			defer close(stop)
			id := uid
			if !tc.readableNS {
				id = ""
			}
			b.cloud.Initialize(clusterBuilder(id), stop)
			g := b.cloud.built().r.(*enforcer)
			deadline := time.Now().Add(3 * time.Second) // well before the dead member is forgotten
			var share, n float64
			for time.Now().Before(deadline) {
				share, _ = b.gauge(t, "cloudgate_fleet_share_rate", map[string]string{"family": "read", "account": account})
				n, _ = b.gauge(t, "cloudgate_fleet_members", map[string]string{"account": account})
				if share == tc.wantShare && int(n) == tc.wantMembers {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Logf("new leader %s: share %.3g/s of %v, %v members", g.fleet.Member(), share, qps, n)
			if share != tc.wantShare || int(n) != tc.wantMembers {
				t.Errorf("share %v with %v members, want %v with %d", share, n, tc.wantShare, tc.wantMembers)
			}
			if m := members(t, r, account); len(m) != tc.wantMembers {
				t.Errorf("Redis members %v, want %d", m, tc.wantMembers)
			}
		})
	}
}
