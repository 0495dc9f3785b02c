//go:build linux

package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/deploy"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// Failover parameters. The lease is short so that the test is; the ratio of
// the three durations is the CCM's default (15 s / 10 s / 2 s).
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// leaderelection polls every retryPeriod × (1 + U[0, 1.2)) (client-go's
	// JitterFactor). The standby's lease clock starts when it sees the dead
	// leader's last renewal (up to one poll after the kill) and it acquires
	// at its first poll past the lease duration: so within lease duration +
	// 2 × retryPeriod × 2.2 of the kill.
	retryJitter = 1.2

	failoverNodes     = 12 // before the kill
	failoverNewNodes  = 4  // created right after the kill
	failoverPageSize  = 4  // simcloud's list page size: 16 nodes are 4 pages
	failoverReadQPS   = 10 // simcloud's read quota
	failoverReadBurst = 20
	firstMinute       = time.Minute
	failoverAccount   = "e2e-failover"
)

// TestFailover runs two CCM replicas (the same binary and flags, leader
// election on) with cloudgate sharing an account's quota through a real
// redis-server (limits.shared) and list prefetch on, against a real
// kube-apiserver + etcd and simcloud. It checks that:
//   - only the leader is in the fleet: Redis holds exactly one member, the
//     cluster's (cluster-<kube-system UID>), and only the leader exports
//     cloudgate's gauges, so the sum over both replicas' /metrics (what the
//     dashboard adds up) is one replica's;
//   - after kill -9 of the leader, the standby holds the lease within the
//     lease duration plus two jittered retry periods (retryJitter);
//   - nodes created after the kill are initialised (by the new leader);
//   - Redis holds exactly the cluster's member at every sample from the kill
//     to the end of the new leader's first minute (the new leader renews the
//     dead one's registration rather than joining beside it);
//   - the new leader's upstream reads in its first minute, with cold caches,
//     stay within the cloud's quota (no throttling answer) and cost at most
//     the pages of one list plus one lookup per node that was not listed yet.
func TestFailover(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	dir := t.TempDir()
	ccmBuild.Start()
	checks := map[string]int{}

	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	rbac, err := deploy.Objects("rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Apply(ctx, rbac); err != nil {
		t.Fatal(err)
	}
	ks, err := cp.Admin.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterMember := "cluster-" + string(ks.UID)

	redis := fleettest.Start(t)
	apiKey := e2e.RandomToken(t)
	sim, err := simcloud.NewServer(simcloud.ServerConfig{
		APIKey:  simcloud.Secret(apiKey),
		ReadQPS: failoverReadQPS, ReadBurst: failoverReadBurst,
		ListPageSize: failoverPageSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	insts, err := sim.AddInstances(failoverNodes, "fo")
	if err != nil {
		t.Fatal(err)
	}
	cloudConfig := filepath.Join(dir, "cloudgate.yaml")
	e2e.WriteFile(t, cloudConfig, fmt.Sprintf(`upstream:
  name: simcloud
  config: |
    endpoint: %s
    apiKey: %s
    clusterName: kubernetes
limits:
  read: {qps: %v, burst: %d}
  shared:
    redis: {address: %q, passwordFile: %q}
    account: %s
    heartbeat: 100ms
batch: {listPrefetch: true}
`, sim.URL(), apiKey, 0.9*failoverReadQPS, failoverReadBurst/2, redis.Addr, redis.PasswordFile, failoverAccount))
	kubeconfig := filepath.Join(dir, "ccm.kubeconfig")
	cp.Kubeconfig(t, kubeconfig, cp.CCMToken)
	ccmBin := ccmBuild.Binary(ctx, t)

	type replica struct {
		name  string
		proc  *e2e.Process
		https *http.Client
		url   string
	}
	start := func(name string) replica {
		port := e2e.FreePort(t)
		p := e2e.StartProcess(t, dir, name, ccmBin,
			"--kubeconfig="+kubeconfig,
			"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
			"--leader-elect=true",
			"--leader-elect-lease-duration="+leaseDuration.String(),
			"--leader-elect-renew-deadline="+renewDeadline.String(),
			"--leader-elect-retry-period="+retryPeriod.String(),
			"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port),
			"--webhook-secure-port=0",
			"--cloud-provider=cloudgate", "--cloud-config="+cloudConfig,
			"--controllers=cloud-node,cloud-node-lifecycle",
			"--use-service-account-credentials=false",
			"--node-status-update-frequency="+statusUpdateEvery.String(),
			"--node-monitor-period="+monitorEvery.String(),
			"--v=2",
		)
		https, url := p.WaitServing(ctx, t, port, cp.AdminToken, 2*time.Minute)
		return replica{name: name, proc: p, https: https, url: url}
	}
	scrape := func(r replica) []e2e.Sample {
		t.Helper()
		code, body, err := e2e.Get(r.https, r.url+"/metrics", cp.AdminToken)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s /metrics: HTTP %d, %v: %.300s", r.name, code, err, body)
		}
		s, err := e2e.ParseMetrics(body)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	leases := cp.Admin.CoordinationV1().Leases(metav1.NamespaceSystem)
	holder := func() (string, time.Time) {
		l, err := leases.Get(ctx, "cloud-controller-manager", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return "", time.Time{}
		}
		var acquired time.Time
		if l.Spec.AcquireTime != nil {
			acquired = l.Spec.AcquireTime.Time
		}
		return *l.Spec.HolderIdentity, acquired
	}
	members := func() []string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		m, err := redis.Admin().HKeys(c, "cloudgate:{"+failoverAccount+"}:weights").Result()
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(m)
		return m
	}

	// A starts first and leads; B then starts as the standby.
	a := start("ccm-a")
	var leaderA string
	if err := e2e.Poll(ctx, "ccm-a holds the lease", 100*time.Millisecond, time.Minute, func() (bool, error) {
		leaderA, _ = holder()
		return leaderA != "", fmt.Errorf("no holder")
	}); err != nil {
		t.Fatal(err)
	}
	b := start("ccm-b")

	nodes := cp.Admin.CoreV1().Nodes()
	createNodes := func(is []simcloud.Instance) {
		for _, inst := range is {
			if _, err := nodes.Create(ctx, e2e.UninitializedNode(inst.NodeName), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			cp.SetNodeReady(ctx, t, inst.NodeName, corev1.ConditionTrue)
		}
	}
	waitInitialized := func(is []simcloud.Instance, what string) time.Duration {
		began := time.Now()
		var pending []string
		err := e2e.Poll(ctx, what, 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
			pending = pending[:0]
			for _, inst := range is {
				node, err := nodes.Get(ctx, inst.NodeName, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if problem := initialized(node, inst); problem != "" {
					pending = append(pending, inst.NodeName+": "+problem)
				}
			}
			return len(pending) == 0, fmt.Errorf("%d of %d nodes not initialized: %v", len(pending), len(is), pending)
		})
		if err != nil {
			t.Fatal(err)
		}
		checks["node initialised"] += len(is)
		return time.Since(began)
	}
	createNodes(insts)
	t.Logf("%d nodes initialized by the leader in %.1fs", len(insts), waitInitialized(insts, "nodes initialized").Seconds())

	// Before the kill: one member, the cluster's; only the leader exports
	// cloudgate's gauges, so the two replicas' sum is the leader's value.
	if h, _ := holder(); h != leaderA {
		t.Fatalf("lease holder changed to %q before the kill", h)
	}
	if m := members(); !slices.Equal(m, []string{clusterMember}) {
		t.Errorf("Redis members with one leader and one standby: %v, want exactly [%s]", m, clusterMember)
	}
	checks["one member"]++
	replicaSums := func(ms ...[]e2e.Sample) (total float64, seriesPer []int) {
		for _, m := range ms {
			v, n := e2e.Sum(m, "cloudgate_limiter_configured_rate", map[string]string{"bucket": "read"})
			total += v
			seriesPer = append(seriesPer, n)
		}
		return total, seriesPer
	}
	ma, mb := scrape(a), scrape(b)
	sum, per := replicaSums(ma, mb)
	if want := 0.9 * failoverReadQPS; math.Abs(sum-want) > 1e-9 || per[0] != 1 || per[1] != 0 {
		t.Errorf("configured read rate summed over replicas = %v (series: leader %d, standby %d), want %v from the leader alone", sum, per[0], per[1], want)
	}
	checks["standby exports nothing"]++
	for _, name := range []string{"cloudgate_requests_total", "cloudgate_fleet_members", "cloudgate_fleet_share_rate", "cloudgate_quota_utilization_ratio"} {
		if _, n := e2e.Sum(mb, name, nil); n != 0 {
			t.Errorf("the standby exports %d series of %s", n, name)
		}
		if _, n := e2e.Sum(ma, name, nil); n == 0 {
			t.Errorf("the leader exports no %s", name)
		}
		checks["standby exports nothing"]++
	}
	if v, _ := e2e.Sum(ma, "cloudgate_fleet_share_rate", map[string]string{"family": "read", "account": failoverAccount}); v != 0.9*failoverReadQPS {
		t.Errorf("the leader's fleet share = %v, want the whole read quota %v (one member)", v, 0.9*failoverReadQPS)
	}

	// Watch Redis's membership from the kill on, every 100 ms.
	var (
		memMu      sync.Mutex
		memSamples int
		memWrong   []string
	)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-watchCtx.Done():
				return
			case <-tk.C:
			}
			c, cancel := context.WithTimeout(watchCtx, 2*time.Second)
			m, err := redis.Admin().HKeys(c, "cloudgate:{"+failoverAccount+"}:weights").Result()
			cancel()
			if err != nil {
				continue
			}
			slices.Sort(m)
			memMu.Lock()
			memSamples++
			if !slices.Equal(m, []string{clusterMember}) && len(memWrong) < 5 {
				memWrong = append(memWrong, fmt.Sprint(m))
			}
			memMu.Unlock()
		}
	}()

	// kill -9 the leader; new nodes arrive right after.
	c0 := sim.Counters()
	killed := time.Now()
	a.proc.Kill(t)
	more, err := sim.AddInstances(failoverNewNodes, "fo-late")
	if err != nil {
		t.Fatal(err)
	}
	createNodes(more)

	var leaderB string
	var acquired time.Time
	if err := e2e.Poll(ctx, "the standby holds the lease", 50*time.Millisecond, time.Minute, func() (bool, error) {
		leaderB, acquired = holder()
		return leaderB != "" && leaderB != leaderA, fmt.Errorf("holder %q", leaderB)
	}); err != nil {
		t.Fatal(err)
	}
	takeover := acquired.Sub(killed)
	bound := leaseDuration + 2*time.Duration(float64(retryPeriod)*(1+retryJitter))
	t.Logf("takeover: ccm-b acquired the lease %.2fs after kill -9 of ccm-a (bound: lease %v + 2 × retry %v × %.1f = %v)",
		takeover.Seconds(), leaseDuration, retryPeriod, 1+retryJitter, bound)
	if takeover > bound {
		t.Errorf("the standby took %v to lead, more than %v", takeover, bound)
	}
	checks["takeover within bound"]++

	// A third replica joins as the standby; at the end ccm-b gets SIGTERM (a
	// rolling update) and must hand the Lease over (released, not waited out).
	c := start("ccm-c")

	waitInitialized(more, "nodes created after the kill initialized")
	t.Logf("%d nodes created after the kill initialized %.1fs after the new leader acquired the lease (%.1fs after the kill)",
		len(more), time.Since(acquired).Seconds(), time.Since(killed).Seconds())

	// The new leader's first minute.
	if wait := time.Until(acquired.Add(firstMinute)); wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	c1 := sim.Counters()
	stopWatch()
	<-watchDone
	reads, throttled := c1.ReadCalls-c0.ReadCalls, c1.ReadThrottled-c0.ReadThrottled
	lists := c1.Calls[simcloud.MethodListInstances] - c0.Calls[simcloud.MethodListInstances]
	byMethod := map[string]int64{}
	for m, n := range c1.Calls {
		if d := n - c0.Calls[m]; d > 0 {
			byMethod[m] = d
		}
	}
	total := failoverNodes + failoverNewNodes
	pages := int64((total + failoverPageSize - 1) / failoverPageSize)
	quota := int64(failoverReadQPS*firstMinute.Seconds()) + failoverReadBurst
	t.Logf("new leader's first minute: %d upstream reads (%v), %d throttled; one list of %d instances is %d pages; the cloud's read quota allows %d a minute",
		reads, byMethod, throttled, total, pages, quota)
	if throttled != 0 || reads > quota {
		t.Errorf("the new leader's first minute: %d reads, %d throttled; want 0 throttled and <= %d", reads, throttled, quota)
	}
	checks["first minute within quota"]++
	// Cold caches with list prefetch: the list answers every node's lookup;
	// what may go upstream besides its pages is one lookup per node (a
	// controller's sync can run before the first list lands).
	if limit := pages + int64(total); reads > limit {
		t.Errorf("the new leader's first minute cost %d reads, more than one list (%d pages) plus one lookup per node (%d)", reads, pages, total)
	}
	if lists < pages || lists > 2*pages {
		t.Errorf("the new leader listed %d pages in its first minute, want one list (%d pages; two if a refresh fell in the minute)", lists, pages)
	}
	checks["first minute <= one list + one lookup per node"]++

	memMu.Lock()
	t.Logf("Redis membership sampled %d times from the kill to the end of the first minute; samples other than [%s]: %v",
		memSamples, clusterMember, memWrong)
	if memSamples == 0 || len(memWrong) > 0 {
		t.Errorf("Redis members after the kill: want exactly [%s] at every sample, got %v (of %d samples)", clusterMember, memWrong, memSamples)
	}
	checks["one member (samples)"] += memSamples
	memMu.Unlock()

	mb = scrape(b)
	served, _ := e2e.Sum(mb, "cloudgate_requests_total", map[string]string{"provider": "simcloud"})
	t.Logf("the new leader served %.0f controller requests from takeover to now with those %d upstream reads", served, reads)
	if v, _ := e2e.Sum(mb, "cloudgate_fleet_share_rate", map[string]string{"family": "read", "account": failoverAccount}); v != 0.9*failoverReadQPS {
		t.Errorf("the new leader's fleet share = %v, want the whole read quota %v", v, 0.9*failoverReadQPS)
	}
	checks["new leader's share whole"]++
	if done, err := b.proc.Exited(); done {
		t.Errorf("the new leader exited: %v", err)
	}

	// SIGTERM to the leader, as a rolling update or `helm uninstall` does:
	// cloudgate's election (cmd/ccm/lease.go) releases the Lease, so the
	// standby takes it at its next poll (retry period × up to 2.2), not after
	// the lease duration. Without the release it could not lead before the
	// leader's last renewal + the lease duration (>= leaseDuration -
	// retryPeriod after the signal).
	if h, _ := holder(); h != leaderB {
		t.Fatalf("lease holder %q before the SIGTERM, want ccm-b's %q", h, leaderB)
	}
	termed := time.Now()
	b.proc.Terminate(t)
	var leaderC string
	var acquiredC time.Time
	if err := e2e.Poll(ctx, "ccm-c holds the lease after SIGTERM to ccm-b", 20*time.Millisecond, time.Minute, func() (bool, error) {
		leaderC, acquiredC = holder()
		return leaderC != "" && leaderC != leaderB, fmt.Errorf("holder %q", leaderC)
	}); err != nil {
		t.Fatal(err)
	}
	handover := acquiredC.Sub(termed)
	const handoverBound = 5 * time.Second
	expiryFloor := leaseDuration - retryPeriod
	t.Logf("SIGTERM handover: ccm-c acquired the lease %.2fs after SIGTERM to the leader ccm-b (bound %v, and < %v: a lease waited out takes at least that; lease %v, retry %v)",
		handover.Seconds(), handoverBound, expiryFloor, leaseDuration, retryPeriod)
	if handover > handoverBound || handover >= expiryFloor {
		t.Errorf("SIGTERM handover took %v: want < %v and < %v (the Lease was not released?)", handover, handoverBound, expiryFloor)
	}
	checks["SIGTERM handover < 5s"]++
	if err := b.proc.WaitExit(10 * time.Second); err != nil {
		t.Errorf("ccm-b after SIGTERM: %v (want exit status 0)", err)
	}
	checks["SIGTERM exit 0"]++
	last, err := sim.AddInstances(1, "fo-term")
	if err != nil {
		t.Fatal(err)
	}
	createNodes(last)
	waitInitialized(last, "a node created after the SIGTERM initialized (by ccm-c)")
	if done, err := c.proc.Exited(); done {
		t.Errorf("the newest leader exited: %v", err)
	}

	var ks2 []string
	for k, n := range checks {
		ks2 = append(ks2, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(ks2)
	t.Logf("checks: %s", strings.Join(ks2, " "))
}
