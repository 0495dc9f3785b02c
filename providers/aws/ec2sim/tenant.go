package ec2sim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Tenant is another workload of the same account: Karpenter, the VPC CNI,
// another cluster's CCM. It sends read-only requests at a steady rate per
// action, signed with its own access key ID (map it to the CCM's account
// with Config.Accounts so that both draw from the same buckets), and does
// not retry a throttled request: each RequestLimitExceeded (or Throttling)
// it gets is one the CCM's load made it suffer.
type Tenant struct {
	URL       string // the simulator's endpoint ([Server].URL)
	AccessKey string
	// Rates are the requests per second per action key (an EC2 action, or
	// "elb:"/"elbv2:" + a load-balancing one): DescribeInstances,
	// DescribeSecurityGroups, DescribeSubnets, elb:DescribeLoadBalancers,
	// elbv2:DescribeLoadBalancers, elbv2:DescribeTargetGroups.
	Rates map[string]float64
	// Concurrency bounds the requests in flight per action (0: 32).
	Concurrency int

	mu    sync.Mutex
	stats map[string]*TenantStats
}

// TenantStats are what one action's requests got, as the tenant saw them.
type TenantStats struct {
	Sent      atomic.Int64
	Throttled atomic.Int64
	Failed    atomic.Int64 // any other error (a NotFound answer is answered), the connection's included
}

// tenantForms are the requests a tenant sends: cheap reads of its own
// resources, as a controller polling what it manages does (a filter that
// matches none of the cluster's instances; load balancers and target
// groups by a name the cluster does not use, answered NotFound). Each
// takes a token from its bucket like any other request, and none makes
// the simulator list the cluster's load balancers and their backends: a
// storm of those would be paced by the simulator's CPU, not by the bucket.
var tenantForms = map[string]url.Values{
	"DescribeInstances":           {"Action": {"DescribeInstances"}, "Version": {APIVersion}, "Filter.1.Name": {"tag-key"}, "Filter.1.Value.1": {"karpenter.sh/nodepool"}},
	"DescribeSecurityGroups":      {"Action": {"DescribeSecurityGroups"}, "Version": {APIVersion}, "Filter.1.Name": {"group-name"}, "Filter.1.Value.1": {"neighbour-tenant"}},
	"DescribeSubnets":             {"Action": {"DescribeSubnets"}, "Version": {APIVersion}, "Filter.1.Name": {"tag-key"}, "Filter.1.Value.1": {"neighbour-tenant"}},
	"elb:DescribeLoadBalancers":   {"Action": {"DescribeLoadBalancers"}, "Version": {ELBAPIVersion}, "LoadBalancerNames.member.1": {"neighbour-tenant"}},
	"elbv2:DescribeLoadBalancers": {"Action": {"DescribeLoadBalancers"}, "Version": {ELBv2APIVersion}, "Names.member.1": {"neighbour-tenant"}},
	"elbv2:DescribeTargetGroups":  {"Action": {"DescribeTargetGroups"}, "Version": {ELBv2APIVersion}, "Names.member.1": {"neighbour-tenant"}},
}

// TenantActions are the action keys a Tenant can send.
func TenantActions() []string {
	out := make([]string, 0, len(tenantForms))
	for k := range tenantForms {
		out = append(out, k)
	}
	return out
}

// Validate reports a Tenant that cannot run, naming the field.
func (t *Tenant) Validate() error {
	if t.URL == "" {
		return fmt.Errorf("ec2sim: Tenant.URL is required")
	}
	if t.AccessKey == "" {
		return fmt.Errorf("ec2sim: Tenant.AccessKey is required (it picks the account whose buckets the tenant draws from)")
	}
	if len(t.Rates) == 0 {
		return fmt.Errorf("ec2sim: Tenant.Rates is empty")
	}
	for a, r := range t.Rates {
		if _, ok := tenantForms[a]; !ok {
			return fmt.Errorf("ec2sim: Tenant.Rates[%q]: not an action a tenant sends (one of %s)", a, strings.Join(TenantActions(), ", "))
		}
		if r <= 0 {
			return fmt.Errorf("ec2sim: Tenant.Rates[%q] must be > 0 (got %g)", a, r)
		}
	}
	if t.Concurrency < 0 {
		return fmt.Errorf("ec2sim: Tenant.Concurrency must be >= 0 (got %d)", t.Concurrency)
	}
	return nil
}

// Stats returns the tenant's counters for one action key (zero before Run).
func (t *Tenant) Stats(action string) (sent, throttled, failed int64) {
	t.mu.Lock()
	st := t.stats[action]
	t.mu.Unlock()
	if st == nil {
		return 0, 0, 0
	}
	return st.Sent.Load(), st.Throttled.Load(), st.Failed.Load()
}

// Run sends the requests until ctx ends, then waits for those in flight.
// A storm is a Run with rates above the buckets' refill under a context
// that ends when the storm does.
func (t *Tenant) Run(ctx context.Context) error {
	if err := t.Validate(); err != nil {
		return err
	}
	conc := t.Concurrency
	if conc == 0 {
		conc = 32
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conc * len(t.Rates)}}
	defer client.CloseIdleConnections()
	t.mu.Lock()
	if t.stats == nil {
		t.stats = map[string]*TenantStats{}
	}
	for a := range t.Rates {
		if t.stats[a] == nil {
			t.stats[a] = &TenantStats{}
		}
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for a, r := range t.Rates {
		st := t.stats[a]
		body := tenantForms[a].Encode()
		lim := rate.NewLimiter(rate.Limit(r), 1)
		sem := make(chan struct{}, conc)
		wg.Go(func() {
			var inflight sync.WaitGroup
			defer inflight.Wait()
			for lim.Wait(ctx) == nil {
				select {
				case sem <- struct{}{}:
				case <-ctx.Done():
					return
				}
				inflight.Go(func() {
					defer func() { <-sem }()
					t.send(ctx, client, body, st)
				})
			}
		})
	}
	wg.Wait()
	return nil
}

func (t *Tenant) send(ctx context.Context, c *http.Client, body string, st *TenantStats) {
	// A request sent is let finish (the client's timeout bounds it), so
	// that the tenant's counts and the simulator's agree when Run ends.
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, t.URL, strings.NewReader(body))
	if err != nil {
		st.Failed.Add(1)
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	// Signed as an SDK signs, with the tenant's own key: the simulator
	// verifies the signature and draws from that key's account's buckets.
	if err := Sign(req, body, t.AccessKey, "ec2"); err != nil {
		st.Failed.Add(1)
		return
	}
	st.Sent.Add(1)
	resp, err := c.Do(req)
	if err != nil {
		st.Failed.Add(1)
		return
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case strings.Contains(string(b), "<Code>RequestLimitExceeded</Code>") || strings.Contains(string(b), "<Code>Throttling</Code>"):
		st.Throttled.Add(1)
	case strings.Contains(string(b), "NotFound</Code>"):
		// The answer to a read of a name nobody uses: answered.
	default:
		st.Failed.Add(1)
	}
}
