package dashboards_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
)

// mayBeEmpty lists the panels the e2e load does not exercise, and why; a
// panel added here must say why this run cannot produce its data.
var mayBeEmpty = map[string]string{
	"Cloud requests by method and action":  requestGateOnly,
	"Cloud requests throttled or not sent": requestGateOnly,
	"Cloud request latency p99 by action":  requestGateOnly,
}

// requestGateOnly: the request-level series come from a provider's request
// gate in its SDK (providers/aws/awsrequests), which simcloud's client does
// not have; providers/aws's TestE2ECloudRequests checks them against ec2sim.
const requestGateOnly = "simcloud's client has no request gate; TestE2ECloudRequests checks these series"

// mustBePositive lists panels whose data must go above zero at some point of
// the run (not just exist), because the run deliberately causes it.
var mustBePositive = map[string]string{
	"Upstream call rate by method":        "the run sends calls upstream",
	"Throttled answers":                   "the run exceeds simcloud's read quota",
	"Adaptive rate changes":               "throttling cuts the read bucket's rate",
	"Breaker state":                       "the outage phase opens the read breaker",
	"Breaker transitions":                 "the outage phase opens the read breaker",
	"Cache hit ratio":                     "the run reads the same nodes again",
	"Batch size":                          "concurrent node lookups are batched",
	"Waits abandoned":                     "calls with short deadlines queue behind a drained bucket",
	"Controller request errors by method": "the outage fails reads",
	"Quota utilisation":                   "the run admits calls",
	"Cache misses, de-duplication, stale reads, evictions": "the first reads miss",
}

// TestE2EDashboardWithPrometheus runs a short load through cloudgate in
// front of simcloud, has a real Prometheus scrape it every second, and
// queries every dashboard panel through the Prometheus HTTP API.
func TestE2EDashboardWithPrometheus(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e: skipped with -short")
	}
	promBin := tool(t, "prometheus")

	// cloudgate in front of simcloud. simcloud's read quota (40/s) is far
	// below cloudgate's read bucket (400/s), so bursts are throttled.
	srv, err := simcloud.NewServer(simcloud.ServerConfig{
		Seed: 5, ReadQPS: 40, ReadBurst: 20, BaseLatency: time.Millisecond, Jitter: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	insts, err := srv.AddInstances(300, "node")
	if err != nil {
		t.Fatal(err)
	}
	client, err := simcloud.NewClient(simcloud.ClientConfig{Endpoint: srv.URL(), APIKey: "e2e", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)

	m := metrics.New()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := provider.DefaultConfig()
	cfg.Metrics = m
	cfg.Limits.Read = provider.BucketConfig{QPS: 400, Burst: 50}
	cfg.Limits.Write = provider.BucketConfig{QPS: 50, Burst: 10}
	cfg.Breaker.MinRequests = 5
	cfg.Breaker.Interval = provider.Duration{Duration: 2 * time.Second}
	cfg.Breaker.OpenTimeout = provider.Duration{Duration: 2 * time.Second}
	cfg.Breaker.HalfOpenRequests = 1
	cloud, err := provider.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := cloud.ProviderName(); got != testProvider {
		t.Fatalf("ProviderName() = %q, want %q (the provider label the queries use)", got, testProvider)
	}

	// The metrics endpoint Prometheus scrapes.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shadow := newShadowCloud(t) // shadow_e2e_test.go
	hs := &http.Server{Handler: promhttp.HandlerFor(prometheus.Gatherers{reg, shadow.gatherer()}, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })

	prom := startPrometheus(t, promBin, ln.Addr().String())

	// Wait (bounded) until Prometheus has scraped cloudgate's series.
	if err := waitFor(30*time.Second, func() error {
		v, err := prom.query(`count(cloudgate_breaker_state{provider="` + testProvider + `"})`)
		if err != nil {
			return err
		}
		if len(v) == 0 {
			return errors.New("no cloudgate_breaker_state samples yet")
		}
		return nil
	}); err != nil {
		t.Fatalf("Prometheus never scraped cloudgate: %v\n%s", err, prom.logs())
	}
	start := time.Now().Add(-2 * time.Second)

	stopFleet := startFleetMember(t, m)
	runLoad(t, cloud, srv, insts)
	stopFleet()
	shadow.run(t)

	// Let Prometheus scrape the end state; then every panel query runs over
	// the whole run, one point per second.
	time.Sleep(3 * time.Second)
	end := time.Now()

	d := loadDashboard(t)
	for _, p := range d.queryPanels() {
		var series, finite int
		var maxv = math.Inf(-1)
		for _, tg := range p.Targets {
			expr := substitute(tg.Expr)
			res, err := prom.queryRange(expr, start, end)
			if err != nil {
				t.Errorf("panel %q query %s: %v\n%s", p.Title, tg.RefID, err, expr)
				continue
			}
			series += len(res)
			for _, s := range res {
				for _, v := range s.values {
					if !math.IsNaN(v) && !math.IsInf(v, 0) {
						finite++
						maxv = math.Max(maxv, v)
					}
				}
			}
			t.Logf("panel %q %s: %d series", p.Title, tg.RefID, len(res))
		}
		if why, ok := mayBeEmpty[p.Title]; ok {
			t.Logf("panel %q may be empty (%s): %d series, %d finite points", p.Title, why, series, finite)
			continue
		}
		if finite == 0 {
			t.Errorf("panel %q: no data (%d series, none with a finite value)", p.Title, series)
			continue
		}
		if why, ok := mustBePositive[p.Title]; ok && maxv <= 0 {
			t.Errorf("panel %q: never above zero, but %s", p.Title, why)
		}
	}
	for title := range mustBePositive {
		found := false
		for _, p := range d.queryPanels() {
			found = found || p.Title == title
		}
		if !found {
			t.Errorf("mustBePositive names panel %q, which the dashboard does not have", title)
		}
	}

	// Prometheus loaded alerts.yaml and evaluates every rule without error
	// (their thresholds need minutes, so firing is left to promtool test rules).
	health, err := prom.ruleHealth()
	if err != nil {
		t.Fatalf("/api/v1/rules: %v", err)
	}
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record // a rule has one of them
			if h := health[name]; h != "ok" {
				t.Errorf("rule %s: Prometheus reports health %q", name, h)
			}
			if _, err := prom.query(r.Expr); err != nil {
				t.Errorf("rule %s: %v", name, err)
			}
		}
	}
}

// ruleHealth returns the health ("ok", "err", "unknown") of each loaded rule.
func (p *promServer) ruleHealth() (map[string]string, error) {
	resp, err := p.hc.Get(p.base + "/api/v1/rules")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("status %q", r.Status)
	}
	out := map[string]string{}
	for _, g := range r.Data.Groups {
		for _, rule := range g.Rules {
			out[rule.Name] = rule.Health
			if rule.LastError != "" {
				out[rule.Name] += ": " + rule.LastError
			}
		}
	}
	return out, nil
}

// runLoad drives the phases the dashboard shows: a cold start (misses,
// batches), warm re-reads (hits), load balancers (writes, per-service
// reads), a burst beyond simcloud's quota (throttling, adaptive rate cuts,
// Retry-After), calls with short deadlines behind a drained bucket
// (abandoned waits), and an outage (errors, breaker open, then recovery).
func runLoad(t *testing.T, cloud cloudprovider.Interface, srv *simcloud.Server, insts []simcloud.Instance) {
	t.Helper()
	iv2, ok := cloud.InstancesV2()
	if !ok {
		t.Fatal("no InstancesV2")
	}
	lb, ok := cloud.LoadBalancer()
	if !ok {
		t.Fatal("no LoadBalancer")
	}
	nodes := make([]*v1.Node, len(insts))
	for i, in := range insts {
		nodes[i] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.NodeName}, Spec: v1.NodeSpec{ProviderID: in.ProviderID()}}
	}
	// A few nodes the cloud does not know: not_found answers, negative entries.
	for i := range 5 {
		nodes = append(nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gone-%d", i)},
			Spec: v1.NodeSpec{ProviderID: fmt.Sprintf("simcloud://zone-a/i-gone-%d", i)}})
	}
	svc := func(prefix string, i int) *v1.Service {
		return &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "default",
				UID: types.UID(fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, i))},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer,
				Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: int32(30000 + i)}}},
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// parallel runs f(0..n-1) on at most 64 goroutines and counts errors.
	parallel := func(n int, f func(i int) error) (errs int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				if f(i) != nil {
					mu.Lock()
					errs++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return errs
	}
	var start time.Time // of the current phase
	phase := func(name string, f func()) {
		start = time.Now()
		f()
		t.Logf("load phase %-10s %v", name, time.Since(start).Round(time.Millisecond))
	}

	// Cold start, then warm re-reads, spread over a few seconds so that
	// several scrapes see them.
	phase("cold", func() {
		// Three waves a scrape or more apart: a series is created by its first
		// event, so rate() only sees the events of later scrapes.
		wave := (len(nodes) + 2) / 3
		for lo := 0; lo < len(nodes); lo += wave {
			hi := min(lo+wave, len(nodes))
			errs := parallel(hi-lo, func(i int) error {
				_, err := iv2.InstanceMetadata(ctx, nodes[lo+i])
				if errors.Is(err, cloudprovider.InstanceNotFound) {
					return nil
				}
				return err
			})
			t.Logf("cold InstanceMetadata wave errors: %d", errs)
			time.Sleep(1200 * time.Millisecond)
		}
		_ = parallel(len(nodes), func(i int) error { _, err := iv2.InstanceExists(ctx, nodes[i]); return err })
	})
	phase("warm", func() {
		for round := range 4 {
			_ = parallel(len(nodes), func(i int) error {
				if (i+round)%2 == 0 {
					_, err := iv2.InstanceExists(ctx, nodes[i])
					return err
				}
				_, err := iv2.InstanceMetadata(ctx, nodes[i])
				return err
			})
			time.Sleep(time.Second)
		}
	})
	phase("lb", func() {
		for i := range 8 {
			if _, err := lb.EnsureLoadBalancer(ctx, "kubernetes", svc("lb", i), nodes[:10]); err != nil {
				t.Logf("EnsureLoadBalancer: %v", err)
			}
			if _, _, err := lb.GetLoadBalancer(ctx, "kubernetes", svc("lb", i)); err != nil {
				t.Logf("GetLoadBalancer: %v", err)
			}
		}
	})
	// Far more distinct reads than simcloud's quota admits: 429s.
	phase("throttle", func() {
		errs := parallel(300, func(i int) error {
			_, _, err := lb.GetLoadBalancer(ctx, "kubernetes", svc("burst", i))
			return err
		})
		t.Logf("throttle burst errors: %d, simcloud throttled %d", errs, srv.Counters().TotalThrottled())
	})
	// Calls whose deadline ends while they queue for a token.
	phase("deadline", func() {
		for wave := range 3 {
			errs := parallel(100, func(i int) error {
				cctx, ccancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer ccancel()
				_, _, err := lb.GetLoadBalancer(cctx, "kubernetes", svc("deadline", wave*100+i))
				return err
			})
			t.Logf("short-deadline calls failed: %d of 100", errs)
			time.Sleep(1200 * time.Millisecond)
		}
	})
	// Outage: reads of uncached keys fail, the read breaker opens; reads
	// keep coming for a few seconds (failing fast), then the cloud recovers
	// and the breaker closes through half-open.
	phase("outage", func() {
		if err := srv.SetFaults(simcloud.Faults{Outage: true}); err != nil {
			t.Fatal(err)
		}
		// Long enough for the breaker to open, probe (half-open), fail and
		// open again at least twice: OpenTimeout is 2s.
		for i := 0; i < 100 && time.Since(start) < 7*time.Second; i++ {
			_, _, _ = lb.GetLoadBalancer(ctx, "kubernetes", svc("outage", i))
			time.Sleep(75 * time.Millisecond)
		}
		if err := srv.SetFaults(simcloud.Faults{}); err != nil {
			t.Fatal(err)
		}
	})
	phase("recover", func() {
		deadline := time.Now().Add(15 * time.Second)
		for i := 0; time.Now().Before(deadline); i++ {
			_, _, err := lb.GetLoadBalancer(ctx, "kubernetes", svc("recover", i))
			if err == nil && i > 5 {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
}

// promServer is a Prometheus server started by the test.
type promServer struct {
	base string
	hc   *http.Client
	log  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (p *promServer) logs() string {
	p.log.mu.Lock()
	defer p.log.mu.Unlock()
	s := p.log.b.String()
	if len(s) > 4000 {
		s = "...\n" + s[len(s)-4000:]
	}
	return s
}

// startPrometheus starts the Debian prometheus binary on 127.0.0.1 scraping
// target every second, and waits (bounded) until it is ready. It is killed
// in t.Cleanup.
func startPrometheus(t *testing.T, bin, target string) *promServer {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: cloudgate
    static_configs:
      - targets: [%q]
`, mustAbs(t, filepath.Join(dashDir, "alerts.yaml")), target)), 0o600); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := range 3 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		p := &promServer{base: "http://" + addr, hc: &http.Client{Timeout: 10 * time.Second}, log: &lockedBuffer{}}
		cmd := exec.Command(bin,
			"--config.file="+conf,
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data-%d", attempt)),
			"--web.listen-address="+addr,
			"--web.console.templates="+dir, "--web.console.libraries="+dir,
			"--log.level=warn",
		)
		cmd.Stdout, cmd.Stderr = p.log, p.log
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", bin, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() {
			_ = cmd.Process.Kill()
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				t.Errorf("prometheus (pid %d) did not exit after kill", cmd.Process.Pid)
			}
		}
		ready := make(chan error, 1)
		go func() {
			ready <- waitFor(30*time.Second, func() error {
				select {
				case err := <-exited:
					exited <- err
					return fmt.Errorf("prometheus exited: %v", err)
				default:
				}
				resp, err := p.hc.Get(p.base + "/-/ready")
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("/-/ready: %s", resp.Status)
				}
				return nil
			})
		}()
		if lastErr = <-ready; lastErr == nil {
			t.Cleanup(stop)
			out, _ := exec.Command(bin, "--version").CombinedOutput()
			t.Logf("started %s on %s, scraping %s", strings.SplitN(string(out), "\n", 2)[0], addr, target)
			return p
		}
		stop()
		t.Logf("prometheus attempt %d on %s: %v\n%s", attempt+1, addr, lastErr, p.logs())
	}
	t.Fatalf("prometheus did not start: %v", lastErr)
	return nil
}

func mustAbs(t *testing.T, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor calls f every 200ms until it returns nil or timeout passes.
func waitFor(timeout time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type promSeries struct {
	metric map[string]string
	values []float64
}

type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func (p *promServer) api(path string, params url.Values) ([]promSeries, error) {
	resp, err := p.hc.PostForm(p.base+path, params)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", path, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	var out []promSeries
	for _, s := range r.Data.Result {
		ps := promSeries{metric: s.Metric}
		pairs := s.Values
		if s.Value != nil {
			pairs = [][]any{s.Value}
		}
		for _, pair := range pairs {
			if len(pair) != 2 {
				return nil, fmt.Errorf("%s: bad sample %v", path, pair)
			}
			str, _ := pair[1].(string)
			v, err := strconv.ParseFloat(str, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: bad value %v", path, pair[1])
			}
			ps.values = append(ps.values, v)
		}
		out = append(out, ps)
	}
	return out, nil
}

func (p *promServer) query(expr string) ([]promSeries, error) {
	return p.api("/api/v1/query", url.Values{"query": {expr}})
}

func (p *promServer) queryRange(expr string, start, end time.Time) ([]promSeries, error) {
	return p.api("/api/v1/query_range", url.Values{
		"query": {expr},
		"start": {strconv.FormatFloat(float64(start.UnixMilli())/1000, 'f', 3, 64)},
		"end":   {strconv.FormatFloat(float64(end.UnixMilli())/1000, 'f', 3, 64)},
		"step":  {"1"},
	})
}
