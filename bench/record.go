package bench

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
)

// recorder is a thin cloudprovider.Interface decorator handed to the
// controllers: it times every call the controllers make and counts the
// errors they see, whatever sits below it (the bare provider or cloudgate).
// It wraps InstancesV2, LoadBalancer and Routes, the interfaces the four
// controllers use when the provider has InstancesV2; Instances, Zones and
// Clusters pass through untimed.
type recorder struct {
	up cloudprovider.Interface

	mu        sync.Mutex
	latencies []time.Duration
	calls     map[string]int64
	errs      map[string]int64
	holds     map[string]int64 // not-found guard holds, not in errs
	// writes issued by the controllers (LB ensure/update/delete, routes).
	writesIssued, writesFailed int64
	// lastWrite is when the latest write call ended; writesInflight
	// are the write calls in progress.
	lastWrite      time.Time
	writesInflight int

	// status are the InstanceMetadata calls (equal work: the status
	// loop's pace).
	status []statusCall

	// inflight are the calls in progress, by id, with their start.
	inflight map[uint64]time.Time
	nextID   uint64

	// onExists and onMetadata, when set, see every InstanceExists and
	// InstanceMetadata answer (chaos).
	onExists   func(node *v1.Node, exists bool, err error)
	onMetadata func(node *v1.Node, err error)
	// onCall, when set, sees every call's outcome (the chaos timeline).
	onCall func(method string, write bool, err error)
}

// call is one call in progress.
type call struct {
	id    uint64
	start time.Time
}

// begin registers a call in progress.
func (r *recorder) begin() call {
	now := time.Now()
	r.mu.Lock()
	r.nextID++
	id := r.nextID
	r.inflight[id] = now
	r.mu.Unlock()
	return call{id, now}
}

// beginWrite registers a write call in progress.
func (r *recorder) beginWrite() call {
	r.mu.Lock()
	r.writesInflight++
	r.mu.Unlock()
	return r.begin()
}

// oldestInflight is how long the oldest call in progress has run (real).
func (r *recorder) oldestInflight() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var oldest time.Duration
	now := time.Now()
	for _, t := range r.inflight {
		oldest = max(oldest, now.Sub(t))
	}
	return oldest
}

func newRecorder(up cloudprovider.Interface) *recorder {
	return &recorder{up: up, calls: map[string]int64{}, errs: map[string]int64{}, holds: map[string]int64{}, inflight: map[uint64]time.Time{}, lastWrite: time.Now()}
}

// observe records the end of call c.
func (r *recorder) observe(method string, c call, err error, write bool) {
	if r.onCall != nil {
		r.onCall(method, write, err)
	}
	d := time.Since(c.start)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.inflight, c.id)
	r.latencies = append(r.latencies, d)
	r.calls[method]++
	if write {
		r.writesIssued++
		r.writesInflight--
		r.lastWrite = time.Now()
	}
	if isGuardHold(err) {
		r.holds[method]++
	} else if err != nil && !isAnswer(err) {
		r.errs[method]++
		if write {
			r.writesFailed++
		}
	}
}

// isGuardHold reports cloudgate's not-found guard holding back a "does not
// exist" until a second answer confirms it: a deliberate retryable
// *api.RetryError (the lifecycle controller keeps the Node and asks
// again), not a failure. The guard names itself in the message.
func isGuardHold(err error) bool {
	var retry *cloudproviderapi.RetryError
	return errors.As(err, &retry) && strings.Contains(err.Error(), "(notFoundGuard)")
}

// isAnswer reports the errors that are answers, not failures.
func isAnswer(err error) bool {
	return errors.Is(err, cloudprovider.InstanceNotFound) || errors.Is(err, cloudprovider.NotImplemented) ||
		errors.Is(err, cloudprovider.ImplementedElsewhere)
}

// recorded is a snapshot of what the recorder saw.
type recorded struct {
	Calls, Errors              map[string]int64
	Holds                      int64 // not-found guard holds
	P50, P99                   time.Duration
	WritesIssued, WritesFailed int64
}

// writesInProgress is how many write calls are in progress.
func (r *recorder) writesInProgress() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writesInflight
}

// sinceLastWrite is how long ago the latest write call ended (since the
// recorder was made, or reset, when none has).
func (r *recorder) sinceLastWrite() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Since(r.lastWrite)
}

// count is how many calls of method the controllers made.
func (r *recorder) count(method string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[method]
}

// total is how many calls the controllers made.
func (r *recorder) total() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for _, v := range r.calls {
		n += v
	}
	return n
}

// statusCalls returns the InstanceMetadata calls so far.
func (r *recorder) statusCalls() []statusCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]statusCall(nil), r.status...)
}

// reset forgets everything recorded so far.
func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.latencies = nil
	r.calls, r.errs, r.holds = map[string]int64{}, map[string]int64{}, map[string]int64{}
	r.writesIssued, r.writesFailed = 0, 0
	r.lastWrite = time.Now()
	r.status = nil
}

func (r *recorder) snapshot() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := recorded{Calls: map[string]int64{}, Errors: map[string]int64{}, WritesIssued: r.writesIssued, WritesFailed: r.writesFailed}
	for k, v := range r.calls {
		out.Calls[k] = v
	}
	for k, v := range r.errs {
		out.Errors[k] = v
	}
	for _, v := range r.holds {
		out.Holds += v
	}
	lat := append([]time.Duration(nil), r.latencies...)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	out.P50, out.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
	return out
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

func (r *recorder) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	r.up.Initialize(b, stop)
}
func (r *recorder) Instances() (cloudprovider.Instances, bool) { return r.up.Instances() }
func (r *recorder) Zones() (cloudprovider.Zones, bool)         { return r.up.Zones() }
func (r *recorder) Clusters() (cloudprovider.Clusters, bool)   { return r.up.Clusters() }
func (r *recorder) ProviderName() string                       { return r.up.ProviderName() }
func (r *recorder) HasClusterID() bool                         { return r.up.HasClusterID() }
func (r *recorder) InstancesV2() (cloudprovider.InstancesV2, bool) {
	up, ok := r.up.InstancesV2()
	if !ok || up == nil {
		return nil, ok
	}
	return &recInstancesV2{r, up}, true
}
func (r *recorder) LoadBalancer() (cloudprovider.LoadBalancer, bool) {
	up, ok := r.up.LoadBalancer()
	if !ok || up == nil {
		return nil, ok
	}
	return &recLB{r, up}, true
}
func (r *recorder) Routes() (cloudprovider.Routes, bool) {
	up, ok := r.up.Routes()
	if !ok || up == nil {
		return nil, ok
	}
	return &recRoutes{r, up}, true
}

type recInstancesV2 struct {
	r  *recorder
	up cloudprovider.InstancesV2
}

func (i *recInstancesV2) InstanceExists(ctx context.Context, node *v1.Node) (bool, error) {
	start := i.r.begin()
	ok, err := i.up.InstanceExists(ctx, node)
	i.r.observe("InstanceExists", start, err, false)
	if i.r.onExists != nil {
		i.r.onExists(node, ok, err)
	}
	return ok, err
}

func (i *recInstancesV2) InstanceShutdown(ctx context.Context, node *v1.Node) (bool, error) {
	start := i.r.begin()
	ok, err := i.up.InstanceShutdown(ctx, node)
	i.r.observe("InstanceShutdown", start, err, false)
	return ok, err
}

func (i *recInstancesV2) InstanceMetadata(ctx context.Context, node *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	start := i.r.begin()
	md, err := i.up.InstanceMetadata(ctx, node)
	i.r.observe("InstanceMetadata", start, err, false)
	i.r.mu.Lock()
	i.r.status = append(i.r.status, statusCall{start.start, time.Now()})
	i.r.mu.Unlock()
	if i.r.onMetadata != nil {
		i.r.onMetadata(node, err)
	}
	return md, err
}

type recLB struct {
	r  *recorder
	up cloudprovider.LoadBalancer
}

func (l *recLB) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	start := l.r.begin()
	st, ok, err := l.up.GetLoadBalancer(ctx, cluster, svc)
	l.r.observe("GetLoadBalancer", start, err, false)
	return st, ok, err
}

func (l *recLB) GetLoadBalancerName(ctx context.Context, cluster string, svc *v1.Service) string {
	return l.up.GetLoadBalancerName(ctx, cluster, svc)
}

func (l *recLB) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	start := l.r.beginWrite()
	st, err := l.up.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	l.r.observe("EnsureLoadBalancer", start, err, true)
	return st, err
}

func (l *recLB) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	start := l.r.beginWrite()
	err := l.up.UpdateLoadBalancer(ctx, cluster, svc, nodes)
	l.r.observe("UpdateLoadBalancer", start, err, true)
	return err
}

func (l *recLB) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *v1.Service) error {
	start := l.r.beginWrite()
	err := l.up.EnsureLoadBalancerDeleted(ctx, cluster, svc)
	l.r.observe("EnsureLoadBalancerDeleted", start, err, true)
	return err
}

type recRoutes struct {
	r  *recorder
	up cloudprovider.Routes
}

func (rt *recRoutes) ListRoutes(ctx context.Context, cluster string) ([]*cloudprovider.Route, error) {
	start := rt.r.begin()
	out, err := rt.up.ListRoutes(ctx, cluster)
	rt.r.observe("ListRoutes", start, err, false)
	return out, err
}

func (rt *recRoutes) CreateRoute(ctx context.Context, cluster, hint string, route *cloudprovider.Route) error {
	start := rt.r.beginWrite()
	err := rt.up.CreateRoute(ctx, cluster, hint, route)
	rt.r.observe("CreateRoute", start, err, true)
	return err
}

func (rt *recRoutes) DeleteRoute(ctx context.Context, cluster string, route *cloudprovider.Route) error {
	start := rt.r.beginWrite()
	err := rt.up.DeleteRoute(ctx, cluster, route)
	rt.r.observe("DeleteRoute", start, err, true)
	return err
}
