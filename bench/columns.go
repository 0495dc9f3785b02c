package bench

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
)

// Column is one provider under test, built on a simulated cloud account.
type Column struct {
	Name string
	// Cloud is what the controllers call.
	Cloud cloudprovider.Interface
	// Registry holds cloudgate's metrics (nil for the bare columns).
	Registry *prometheus.Registry
	// Config is the compressed cloudgate policy (nil for the bare columns).
	Config *provider.Config
	// Wire logs every write request sent to the cloud (each retry too).
	Wire   *wireLog
	client *simcloud.Cloud
}

// Close releases the column's client.
func (c *Column) Close() {
	if c.client != nil {
		c.client.Close()
	}
}

// NewColumn builds column col's provider against srv, in memory:
// a simcloud client, wrapped in the provider-typical client for
// bare+client, hidden behind what the column's upstream implements and
// wrapped in cloudgate for the cloudgate columns.
func NewColumn(o *Options, col string, srv *simcloud.Server, clusterName string) (*Column, error) {
	cc := simcloud.ClientConfig{
		Endpoint: srv.URL(), APIKey: "bench", ClusterName: clusterName, Timeout: clientTimeout,
		MaxBatchSize: o.CloudMaxBatch, Transport: srv.Transport(),
		ListTrailingPage: o.CloudListTrailingPage, ListTrailingEvery: o.CloudListTrailingEvery, ListAlive: o.CloudListAlive,
		LBInstanceSnapshot: o.CloudLBSnapshot,
	}
	wire := &wireLog{}
	cc.WrapTransport = func(next http.RoundTripper) http.RoundTripper {
		var rt http.RoundTripper = &wireTransport{next: next, log: wire}
		if col == ColBareClient {
			rt = newTypicalClient(rt, o)
		}
		return rt
	}
	if col == ColBare || col == ColBareClient {
		cc.IDBatcher = o.CloudProviderBatcher
	}
	client, err := simcloud.NewClient(cc)
	if err != nil {
		return nil, err
	}
	c := &Column{Name: col, Cloud: client, client: client, Wire: wire}
	if col == ColBare || col == ColBareClient {
		return c, nil
	}
	cfg, err := o.cloudgateConfig(col)
	if err != nil {
		client.Close()
		return nil, err
	}
	m := metrics.New()
	c.Registry = prometheus.NewRegistry()
	if err := m.Register(c.Registry); err != nil {
		client.Close()
		return nil, err
	}
	cfg.Metrics = m
	c.Config = cfg
	if c.Cloud, err = provider.New(withSupports(client, o.upstreamSupports(col)), cfg); err != nil {
		client.Close()
		return nil, err
	}
	if o.onRegistry != nil {
		o.onRegistry(c.Registry)
	}
	return c, nil
}

// withSupports hides the optional interfaces the user's provider does not
// implement, so cloudgate is measured with what it would really get.
func withSupports(cloud cloudprovider.Interface, supports string) cloudprovider.Interface {
	if supports == SupportsList {
		return cloud
	}
	return &limitedUpstream{Interface: cloud, batch: supports == SupportsBatch}
}

type limitedUpstream struct {
	cloudprovider.Interface
	batch bool
}

type batchOnly struct {
	cloudprovider.InstancesV2
	provider.BatchInstances
}

type plainV2 struct{ cloudprovider.InstancesV2 }

func (l *limitedUpstream) InstancesV2() (cloudprovider.InstancesV2, bool) {
	v2, ok := l.Interface.InstancesV2()
	if !ok || v2 == nil {
		return nil, ok
	}
	if b, isBatch := v2.(provider.BatchInstances); l.batch && isBatch {
		return batchOnly{v2, b}, true
	}
	return plainV2{v2}, true
}

// typicalClient is the "provider-typical client" of bare+client, an HTTP
// transport like the ones real providers ship: a client-side token bucket
// per family at the quota (Azure's per-client buckets), a 429's
// Retry-After honoured in whole (simulated) seconds, and up to maxRetries
// retries of 429, 5xx and transport errors with exponential backoff (the
// AWS SDK retryer). A retry resends the same request, same X-Request-Id.
type typicalClient struct {
	next        http.RoundTripper
	read, write *rate.Limiter
	backoff     time.Duration // first backoff
}

const typicalMaxRetries = 3

func newTypicalClient(next http.RoundTripper, o *Options) *typicalClient {
	return &typicalClient{
		next:    next,
		read:    rate.NewLimiter(rate.Limit(o.ReadQPS), o.ReadBurst),
		write:   rate.NewLimiter(rate.Limit(o.WriteQPS), o.WriteBurst),
		backoff: 100 * time.Millisecond,
	}
}

func (t *typicalClient) RoundTrip(req *http.Request) (*http.Response, error) {
	lim := t.read
	if isWriteRequest(req) {
		lim = t.write
	}
	ctx := req.Context()
	for attempt := 0; ; attempt++ {
		if err := lim.Wait(ctx); err != nil {
			return nil, err
		}
		r := req
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r = req.Clone(ctx)
			r.Body = body
		}
		resp, err := t.next.RoundTrip(r)
		if attempt >= typicalMaxRetries {
			return resp, err
		}
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return resp, err
			}
			wait = t.backoff << attempt
		case resp.StatusCode == http.StatusTooManyRequests:
			wait = t.retryAfter(resp)
		case resp.StatusCode >= 500:
			wait = t.backoff << attempt
		default:
			return resp, nil
		}
		if resp != nil {
			resp.Body.Close()
		}
		if !sleepCtx(ctx, wait) {
			return nil, ctx.Err()
		}
	}
}

// retryAfter is the server's Retry-After rounded up to whole seconds (at
// least one).
func (t *typicalClient) retryAfter(resp *http.Response) time.Duration {
	ms, err := strconv.ParseFloat(resp.Header.Get("X-Retry-After-Ms"), 64)
	if err != nil || ms <= 0 {
		ms = 1
	}
	return time.Duration(math.Max(1, math.Ceil(ms/1000))) * time.Second
}

// isWriteRequest reports whether a simcloud request is charged as a write.
func isWriteRequest(req *http.Request) bool {
	return req.Method != http.MethodGet && req.URL.Path != "/v1/instances:batchGet"
}

// wireEntry is one write request as the wire saw it.
type wireEntry struct {
	RequestID string
	Status    int // 0: no answer (transport error or timeout)
}

// wireLog records every write request sent and its answer, so that the
// cloud's write log can be joined with it on request IDs.
type wireLog struct {
	mu      sync.Mutex
	entries []wireEntry
	// onRequest, when set, sees every request and its status (0: no
	// answer): the chaos timeline.
	onRequest func(req *http.Request, status int)
	// purposes counts the read requests by purpose.
	purposes purposes
}

func (l *wireLog) requestHook() func(*http.Request, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.onRequest
}

func (l *wireLog) add(e wireEntry) {
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
}

func (l *wireLog) snapshot() []wireEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]wireEntry(nil), l.entries...)
}

// wireTransport is the innermost transport: it logs each write attempt.
type wireTransport struct {
	next http.RoundTripper
	log  *wireLog
}

func (t *wireTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.log.purposes.count(req)
	resp, err := t.next.RoundTrip(req)
	if hook := t.log.requestHook(); hook != nil {
		status := 0
		if err == nil {
			status = resp.StatusCode
		}
		hook(req, status)
	}
	if isWriteRequest(req) {
		e := wireEntry{RequestID: req.Header.Get("X-Request-Id")}
		if err == nil {
			e.Status = resp.StatusCode
		}
		t.log.add(e)
	}
	return resp, err
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
