package provider

// The scripted upstream of the history checker (history_test.go): a cloud
// whose instances, load balancers and routes change over simulated time,
// with outages, hangs, throttling and failing batches, that records every
// answer it gives as a fact the checker judges cloudgate's answers against.

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"
)

// faultMode is what the upstream does to the calls of one stretch of rounds.
type faultMode int

const (
	faultNone      faultMode = iota
	faultOutage              // every call fails with a 5xx
	faultHang                // every call hangs until the simulated client timeout or ctx
	faultThrottle            // every call is throttled (429, Retry-After)
	faultBatchFail           // every BatchInstanceStatus and ListInstances call fails
	faultFlaky               // a share of calls (and of batch nodes) fail with a 5xx
)

func (f faultMode) String() string {
	return [...]string{"none", "outage", "hang", "throttle", "batch-fail", "flaky"}[f]
}

// simHangTimeout is the simulated HTTP client timeout of a hanging call.
const simHangTimeout = 3 * time.Second

// simThrottleError is a 429 answer carrying a Retry-After.
type simThrottleError struct {
	msg        string
	retryAfter time.Duration
}

func (e *simThrottleError) Error() string                     { return e.msg }
func (e *simThrottleError) RetryAfter() (time.Duration, bool) { return e.retryAfter, true }

// simInstance is one VM.
type simInstance struct {
	pid, name  string
	gen        int // bumped by every change visible in its answers
	addr       string
	itype      string
	zone       string
	shutdown   bool
	terminated bool // still described, no longer exists (InstanceStatus.Deleted)
}

func (in *simInstance) metadata() *cloudprovider.InstanceMetadata {
	return &cloudprovider.InstanceMetadata{
		ProviderID: in.pid, InstanceType: in.itype, Region: "sim-1", Zone: in.zone,
		// Spare capacity, as a provider building its answer with append
		// has: a caller appending to a shared answer would write in it.
		NodeAddresses: append(make([]v1.NodeAddress, 0, 4), v1.NodeAddress{Type: v1.NodeInternalIP, Address: in.addr}),
	}
}

// factKind classifies an upstream answer as seen by one read method.
type factKind int

const (
	factPos factKind = iota // a value
	factNeg                 // "does not exist"
	factErr                 // an error that is not an answer
)

// fact is what the upstream said, once, about one (method, key): the
// methods are cloudgate's read methods, so a batch or list answer yields the
// facts of InstanceExists, InstanceShutdown and InstanceMetadata at once.
type fact struct {
	seq     int64
	at      time.Time
	method  string
	key     string
	kind    factKind
	val     string
	err     error
	version int    // of the key's LB or route table (read-your-writes)
	via     string // the upstream call that said it
	// said orders the fact by when the upstream computed it (seq is when
	// it was delivered: an answer may arrive up to 1.5 s later, as a list
	// page read before a deletion and received after it).
	said int64
}

// writeReceipt is one write as received by the upstream.
type writeReceipt struct {
	seq     int64
	at      time.Time
	reqID   string
	method  string
	key     string
	applied bool
	version int // the key's version after it was applied
}

// scriptEvent is a change the script made to the upstream's state.
type scriptEvent struct {
	seq  int64
	at   time.Time
	keys []string
	what string
}

// simLB is one Service's load balancer.
type simLB struct {
	exists  bool
	version int
}

// simRoutes is one cluster's route table.
type simRoutes struct {
	routes  map[string]string // name -> destination CIDR (carries the request ID)
	version int
}

// simCloud is the scripted upstream. Its sub-interfaces are itself.
type simCloud struct {
	clk      *clocktesting.FakeClock
	seq      *atomic.Int64
	batch    bool // implements BatchInstances
	list     bool // implements InstanceLister
	maxBatch int
	// initMaxBatch, if set, replaces maxBatch at Initialize (a provider
	// that reads its config there; 0 turns batching off).
	initMaxBatch *int

	mu        sync.Mutex
	rng       *rand.Rand // per-call fault decisions
	mode      faultMode
	byPID     map[string]*simInstance
	byName    map[string]*simInstance
	lbs       map[string]*simLB
	rts       map[string]*simRoutes
	facts     map[[2]string][]fact
	errs      map[error]bool
	receipts  map[string][]writeReceipt
	events    []scriptEvent
	batches   []upstreamBatch
	callCount map[string]int
	nextErr   int
	pending   []fact // facts of the call being answered (s.mu held)
	// longRetryAfter, if set, is the Retry-After of the throttling
	// answers (else 1-3 s): the history's long waits.
	longRetryAfter time.Duration
}

type upstreamBatch struct {
	seq  int64
	at   time.Time
	size int
}

func newSimCloud(clk *clocktesting.FakeClock, seq *atomic.Int64, seed int64, batch, list bool, maxBatch int) *simCloud {
	return &simCloud{
		clk: clk, seq: seq, batch: batch, list: list, maxBatch: maxBatch,
		rng:   rand.New(rand.NewSource(seed ^ 0x5eed)),
		byPID: map[string]*simInstance{}, byName: map[string]*simInstance{},
		lbs: map[string]*simLB{}, rts: map[string]*simRoutes{},
		facts: map[[2]string][]fact{}, errs: map[error]bool{}, receipts: map[string][]writeReceipt{},
		callCount: map[string]int{},
	}
}

// Key spelling shared with the checker; it mirrors keyOfNode.
func pidKey(pid string) string   { return "pid:" + pid }
func nameKey(name string) string { return "name:" + name }
func lbKeyOf(svc *v1.Service) string {
	return "lb:" + svc.Namespace + "/" + svc.Name + "/" + string(svc.UID)
}
func routeKey(cluster string) string { return "routes:" + cluster }

func nodeKeyString(n *v1.Node) string {
	if n.Spec.ProviderID != "" {
		return pidKey(n.Spec.ProviderID)
	}
	return nameKey(n.Name)
}

// --- recording (s.mu held) ---

func (s *simCloud) stamp() (int64, time.Time) { return s.seq.Add(1), s.clk.Now() }

func (s *simCloud) addFact(via, method, key string, kind factKind, val string, err error, version int) {
	seq, at := s.stamp()
	f := fact{seq: seq, at: at, method: method, key: key, kind: kind, val: val, err: err, version: version, via: via, said: seq}
	k := [2]string{method, key}
	s.facts[k] = append(s.facts[k], f)
}

func (s *simCloud) newErr(format string, args ...any) error {
	s.nextErr++
	err := fmt.Errorf(format+" (upstream error #%d)", append(args, s.nextErr)...)
	s.errs[err] = true
	return err
}

// fault decides the failure of one call, or nil; hang reports a hang.
func (s *simCloud) fault(batchish bool) (err error, hang bool) {
	switch s.mode {
	case faultOutage:
		return s.newErr("HTTP 503 ServiceUnavailable: simulated outage"), false
	case faultHang:
		return nil, true
	case faultThrottle:
		e := &simThrottleError{msg: fmt.Sprintf("HTTP 429 TooManyRequests: Throttling: Rate exceeded (upstream error #%d)", s.nextErr+1), retryAfter: time.Duration(1+s.rng.Intn(3)) * time.Second}
		if s.longRetryAfter > 0 {
			e.retryAfter = s.longRetryAfter
		}
		s.nextErr++
		s.errs[e] = true
		return e, false
	case faultBatchFail:
		if batchish {
			return s.newErr("HTTP 500 InternalError: simulated batch failure"), false
		}
	case faultFlaky:
		if s.rng.Intn(10) < 3 {
			return s.newErr("HTTP 502 BadGateway: simulated flake"), false
		}
	}
	return nil, false
}

// call runs the common prologue of every upstream call: count it, apply the
// round's fault (a hang blocks, without s.mu, until the simulated client
// timeout or ctx). It returns with s.mu held when err is nil.
func (s *simCloud) call(ctx context.Context, name string, batchish bool) error {
	s.mu.Lock()
	s.callCount[name]++
	err, hang := s.fault(batchish)
	if !hang && err == nil {
		return nil
	}
	if hang {
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			s.mu.Lock()
			err = s.newErr("sim: %s abandoned: %w", name, ctx.Err())
		case <-s.clk.After(simHangTimeout):
			s.mu.Lock()
			err = s.newErr("sim: %s: Post https://sim.invalid/: %w", name, context.DeadlineExceeded)
		}
	}
	s.mu.Unlock()
	return err
}

// pendFact records a fact of a successful call when the call delivers its
// answer (see deliver).
func (s *simCloud) pendFact(via, method, key string, kind factKind, val string, err error, version int) {
	said, _ := s.stamp()
	s.pending = append(s.pending, fact{method: method, key: key, kind: kind, val: val, err: err, version: version, via: via, said: said})
}

// deliver ends a successful call (s.mu held): in quiet rounds some answers
// take a while to arrive (read at one time, delivered later), which is when
// a write can land between the cloud's read and cloudgate's receipt. The
// facts are stamped with the time of delivery: a bound runs from when the
// upstream answered.
func (s *simCloud) deliver(ctx context.Context) {
	pending := s.pending
	s.pending = nil
	if s.mode == faultNone && s.rng.Intn(100) < 15 {
		latency := time.Duration(100+s.rng.Intn(1400)) * time.Millisecond
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-s.clk.After(latency):
		}
		s.mu.Lock()
	}
	for _, f := range pending {
		f.seq, f.at = s.stamp()
		k := [2]string{f.method, f.key}
		s.facts[k] = append(s.facts[k], f)
	}
	s.mu.Unlock()
}

// failFacts records err as the answer of every method a key's call feeds.
func (s *simCloud) failFacts(via string, methods []string, key string, err error) {
	for _, m := range methods {
		s.addFact(via, m, key, factErr, "", err, 0)
	}
}

var v2Methods = []string{"InstanceExists", "InstanceShutdown", "InstanceMetadata"}

// --- cloudprovider.Interface ---

func (s *simCloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {
	if s.initMaxBatch != nil {
		s.maxBatch = *s.initMaxBatch
	}
}
func (s *simCloud) LoadBalancer() (cloudprovider.LoadBalancer, bool) { return s, true }
func (s *simCloud) Instances() (cloudprovider.Instances, bool)       { return s, true }
func (s *simCloud) InstancesV2() (cloudprovider.InstancesV2, bool) {
	switch {
	case s.batch && s.list:
		return &simBatchLister{simBatch{s}}, true
	case s.batch:
		return &simBatch{s}, true
	case s.list:
		return &simLister{s}, true
	}
	return s, true
}
func (s *simCloud) Zones() (cloudprovider.Zones, bool)       { return s, true }
func (s *simCloud) Clusters() (cloudprovider.Clusters, bool) { return nil, false }
func (s *simCloud) Routes() (cloudprovider.Routes, bool)     { return s, true }
func (s *simCloud) ProviderName() string                     { return "sim" }
func (s *simCloud) HasClusterID() bool                       { return true }

// The optional interfaces are offered by wrapper types so that each run
// offers exactly the combination it was built with.
type simBatch struct{ *simCloud }
type simLister struct{ *simCloud }
type simBatchLister struct{ simBatch }

func (b *simBatchLister) ListInstances(ctx context.Context, token string) ([]InstanceRecord, string, error) {
	return b.listInstances(ctx, token)
}
func (l *simLister) ListInstances(ctx context.Context, token string) ([]InstanceRecord, string, error) {
	return l.listInstances(ctx, token)
}

// --- InstancesV2 ---

// lookupNode finds a node's instance: by provider ID when the node has one.
func (s *simCloud) lookupNode(n *v1.Node) *simInstance {
	if n.Spec.ProviderID != "" {
		return s.byPID[n.Spec.ProviderID]
	}
	return s.byName[n.Name]
}

func (s *simCloud) InstanceExists(ctx context.Context, n *v1.Node) (bool, error) {
	key := nodeKeyString(n)
	if err := s.call(ctx, "InstanceExists", false); err != nil {
		s.mu.Lock()
		s.addFact("InstanceExists", "InstanceExists", key, factErr, "", err, 0)
		s.mu.Unlock()
		return false, err
	}
	defer s.deliver(ctx)
	in := s.lookupNode(n)
	if in == nil || in.terminated {
		s.pendFact("InstanceExists", "InstanceExists", key, factNeg, "false", nil, 0)
		return false, nil
	}
	s.pendFact("InstanceExists", "InstanceExists", key, factPos, "true", nil, 0)
	return true, nil
}

func (s *simCloud) InstanceShutdown(ctx context.Context, n *v1.Node) (bool, error) {
	key := nodeKeyString(n)
	if err := s.call(ctx, "InstanceShutdown", false); err != nil {
		s.mu.Lock()
		s.addFact("InstanceShutdown", "InstanceShutdown", key, factErr, "", err, 0)
		s.mu.Unlock()
		return false, err
	}
	defer s.deliver(ctx)
	in := s.lookupNode(n)
	if in == nil {
		s.pendFact("InstanceShutdown", "InstanceShutdown", key, factNeg, "", cloudprovider.InstanceNotFound, 0)
		return false, cloudprovider.InstanceNotFound
	}
	v := in.shutdown || in.terminated
	s.pendFact("InstanceShutdown", "InstanceShutdown", key, factPos, fmt.Sprint(v), nil, 0)
	return v, nil
}

func (s *simCloud) InstanceMetadata(ctx context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	key := nodeKeyString(n)
	if err := s.call(ctx, "InstanceMetadata", false); err != nil {
		s.mu.Lock()
		s.addFact("InstanceMetadata", "InstanceMetadata", key, factErr, "", err, 0)
		s.mu.Unlock()
		return nil, err
	}
	defer s.deliver(ctx)
	in := s.lookupNode(n)
	if in == nil {
		s.pendFact("InstanceMetadata", "InstanceMetadata", key, factNeg, "", cloudprovider.InstanceNotFound, 0)
		return nil, cloudprovider.InstanceNotFound
	}
	md := in.metadata()
	s.pendFact("InstanceMetadata", "InstanceMetadata", key, factPos, mdString(md), nil, 0)
	return md, nil
}

// factTerminated is the value of a "does not exist" fact from an answer
// that described the instance as terminated (definitive for the not-found
// guard).
const factTerminated = "terminated"

// statusFacts records what one node's batch or list answer tells each v2
// read method.
func (s *simCloud) statusFacts(via, key string, st InstanceStatus) {
	switch {
	case st.Err == cloudprovider.InstanceNotFound:
		for _, m := range v2Methods {
			s.pendFact(via, m, key, factNeg, "false", cloudprovider.InstanceNotFound, 0)
		}
	case st.Err != nil:
		for _, m := range v2Methods {
			s.pendFact(via, m, key, factErr, "", st.Err, 0)
		}
	default:
		s.pendFact(via, "InstanceMetadata", key, factPos, mdString(st.Metadata), nil, 0)
		s.pendFact(via, "InstanceShutdown", key, factPos, fmt.Sprint(st.Shutdown), nil, 0)
		if st.Deleted {
			s.pendFact(via, "InstanceExists", key, factNeg, factTerminated, nil, 0)
		} else {
			s.pendFact(via, "InstanceExists", key, factPos, "true", nil, 0)
		}
	}
}

func (b *simBatch) MaxBatchSize() int { return b.maxBatch }

func (b *simBatch) BatchInstanceStatus(ctx context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	s := b.simCloud
	s.mu.Lock()
	seq, at := s.stamp()
	s.batches = append(s.batches, upstreamBatch{seq: seq, at: at, size: len(nodes)})
	s.mu.Unlock()
	if err := s.call(ctx, "BatchInstanceStatus", true); err != nil {
		s.mu.Lock()
		for _, n := range nodes {
			s.failFacts("BatchInstanceStatus", v2Methods, nodeKeyString(n), err)
		}
		s.mu.Unlock()
		return nil, err
	}
	for _, n := range nodes {
		// Like EC2's DescribeInstances: one bad ID fails the whole call.
		if strings.HasPrefix(n.Spec.ProviderID, "sim://bad-") {
			err := s.newErr("HTTP 400 InvalidInstanceID.Malformed: %q", n.Spec.ProviderID)
			for _, m := range nodes {
				s.failFacts("BatchInstanceStatus", v2Methods, nodeKeyString(m), err)
			}
			s.mu.Unlock()
			return nil, err
		}
	}
	defer s.deliver(ctx)
	out := make([]InstanceStatus, len(nodes))
	for i, n := range nodes {
		in := s.lookupNode(n)
		switch {
		case in == nil:
			out[i] = InstanceStatus{Err: cloudprovider.InstanceNotFound}
		case s.mode == faultFlaky && s.rng.Intn(4) == 0:
			out[i] = InstanceStatus{Err: s.newErr("HTTP 500: node %s: simulated per-node failure", n.Name)}
		default:
			out[i] = InstanceStatus{Metadata: in.metadata(), Shutdown: in.shutdown || in.terminated, Deleted: in.terminated}
		}
		s.statusFacts("BatchInstanceStatus", nodeKeyString(n), out[i])
		// A live instance's answer by node name is also what the upstream
		// said about the provider ID it names (cloudgate caches it under
		// both: batching.go, providerIDKey), as a list record is.
		if n.Spec.ProviderID == "" && out[i].Err == nil && !out[i].Deleted && out[i].Metadata != nil {
			s.statusFacts("BatchInstanceStatus", pidKey(out[i].Metadata.ProviderID), out[i])
		}
	}
	return out, nil
}

// listPage is the page size of ListInstances.
const listPage = 4

func (s *simCloud) listInstances(ctx context.Context, token string) ([]InstanceRecord, string, error) {
	if err := s.call(ctx, "ListInstances", true); err != nil {
		return nil, "", err // a failed list tells no read anything
	}
	defer s.deliver(ctx)
	pids := make([]string, 0, len(s.byPID))
	for pid := range s.byPID {
		pids = append(pids, pid)
	}
	sort.Strings(pids)
	start := 0
	if token != "" {
		start = sort.SearchStrings(pids, token)
	}
	end := min(start+listPage, len(pids))
	var page []InstanceRecord
	for _, pid := range pids[start:end] {
		in := s.byPID[pid]
		rec := InstanceRecord{Metadata: *in.metadata(), Shutdown: in.shutdown || in.terminated, Deleted: in.terminated}
		st := InstanceStatus{Metadata: in.metadata(), Shutdown: rec.Shutdown, Deleted: rec.Deleted}
		s.statusFacts("ListInstances", pidKey(pid), st)
		if s.byName[in.name] == in { // the instance the node name resolves to now
			rec.NodeName = in.name
			s.statusFacts("ListInstances", nameKey(in.name), st)
		}
		page = append(page, rec)
	}
	next := ""
	if end < len(pids) {
		next = pids[end]
	}
	return page, next, nil
}

// --- Instances (v1) ---

func (s *simCloud) v1Lookup(ctx context.Context, method, key string, byPID bool, id string, answer func(*simInstance) (string, any)) (any, error) {
	if err := s.call(ctx, method, false); err != nil {
		s.mu.Lock()
		s.addFact(method, method, key, factErr, "", err, 0)
		s.mu.Unlock()
		return nil, err
	}
	defer s.deliver(ctx)
	in := s.byName[id]
	if byPID {
		in = s.byPID[id]
	} else if in != nil && in.terminated {
		// By node name a terminated instance is not found, as the AWS
		// provider's name lookup filters terminated instances out; the
		// simulator answered InstanceID "exists" for an instance its
		// InstanceExists called gone, and the two answers made the
		// not-found guard's history ambiguous (seed 20 of 32).
		in = nil
	}
	if in == nil {
		s.pendFact(method, method, key, factNeg, "", cloudprovider.InstanceNotFound, 0)
		return nil, cloudprovider.InstanceNotFound
	}
	val, v := answer(in)
	s.pendFact(method, method, key, factPos, val, nil, 0)
	return v, nil
}

func (s *simCloud) NodeAddresses(ctx context.Context, name types.NodeName) ([]v1.NodeAddress, error) {
	v, err := s.v1Lookup(ctx, "NodeAddresses", nameKey(string(name)), false, string(name), func(in *simInstance) (string, any) {
		a := in.metadata().NodeAddresses
		return addrString(a), a
	})
	a, _ := v.([]v1.NodeAddress)
	return a, err
}

func (s *simCloud) NodeAddressesByProviderID(ctx context.Context, pid string) ([]v1.NodeAddress, error) {
	v, err := s.v1Lookup(ctx, "NodeAddressesByProviderID", pidKey(pid), true, pid, func(in *simInstance) (string, any) {
		a := in.metadata().NodeAddresses
		return addrString(a), a
	})
	a, _ := v.([]v1.NodeAddress)
	return a, err
}

func (s *simCloud) InstanceID(ctx context.Context, name types.NodeName) (string, error) {
	v, err := s.v1Lookup(ctx, "InstanceID", nameKey(string(name)), false, string(name), func(in *simInstance) (string, any) {
		id := strings.TrimPrefix(in.pid, "sim://")
		return id, id
	})
	id, _ := v.(string)
	return id, err
}

func (s *simCloud) InstanceType(ctx context.Context, name types.NodeName) (string, error) {
	v, err := s.v1Lookup(ctx, "InstanceType", nameKey(string(name)), false, string(name), func(in *simInstance) (string, any) {
		return in.itype, in.itype
	})
	t, _ := v.(string)
	return t, err
}

func (s *simCloud) InstanceTypeByProviderID(ctx context.Context, pid string) (string, error) {
	v, err := s.v1Lookup(ctx, "InstanceTypeByProviderID", pidKey(pid), true, pid, func(in *simInstance) (string, any) {
		return in.itype, in.itype
	})
	t, _ := v.(string)
	return t, err
}

// --- Zones ---

func zoneString(z cloudprovider.Zone) string { return z.Region + "/" + z.FailureDomain }

// GetZone is the zone cloudgate's own host runs in: constant.
func (s *simCloud) GetZone(ctx context.Context) (cloudprovider.Zone, error) {
	z := cloudprovider.Zone{Region: "sim-1", FailureDomain: "sim-1a"}
	if err := s.call(ctx, "GetZone", false); err != nil {
		return cloudprovider.Zone{}, err
	}
	defer s.deliver(ctx)
	s.pendFact("GetZone", "GetZone", "zone:local", factPos, zoneString(z), nil, 0)
	return z, nil
}

func (s *simCloud) GetZoneByProviderID(ctx context.Context, pid string) (cloudprovider.Zone, error) {
	v, err := s.v1Lookup(ctx, "GetZoneByProviderID", pidKey(pid), true, pid, func(in *simInstance) (string, any) {
		z := cloudprovider.Zone{Region: "sim-1", FailureDomain: in.zone}
		return zoneString(z), z
	})
	z, _ := v.(cloudprovider.Zone)
	return z, err
}

func (s *simCloud) GetZoneByNodeName(ctx context.Context, name types.NodeName) (cloudprovider.Zone, error) {
	v, err := s.v1Lookup(ctx, "GetZoneByNodeName", nameKey(string(name)), false, string(name), func(in *simInstance) (string, any) {
		z := cloudprovider.Zone{Region: "sim-1", FailureDomain: in.zone}
		return zoneString(z), z
	})
	z, _ := v.(cloudprovider.Zone)
	return z, err
}

func (s *simCloud) AddSSHKeyToAllInstances(context.Context, string, []byte) error {
	return cloudprovider.NotImplemented
}

func (s *simCloud) CurrentNodeName(context.Context, string) (types.NodeName, error) {
	return "", cloudprovider.NotImplemented
}

func (s *simCloud) InstanceExistsByProviderID(ctx context.Context, pid string) (bool, error) {
	const method = "InstanceExistsByProviderID"
	key := pidKey(pid)
	if err := s.call(ctx, method, false); err != nil {
		s.mu.Lock()
		s.addFact(method, method, key, factErr, "", err, 0)
		s.mu.Unlock()
		return false, err
	}
	defer s.deliver(ctx)
	if in := s.byPID[pid]; in == nil || in.terminated {
		s.pendFact(method, method, key, factNeg, "false", nil, 0)
		return false, nil
	}
	s.pendFact(method, method, key, factPos, "true", nil, 0)
	return true, nil
}

func (s *simCloud) InstanceShutdownByProviderID(ctx context.Context, pid string) (bool, error) {
	v, err := s.v1Lookup(ctx, "InstanceShutdownByProviderID", pidKey(pid), true, pid, func(in *simInstance) (string, any) {
		b := in.shutdown || in.terminated
		return fmt.Sprint(b), b
	})
	b, _ := v.(bool)
	return b, err
}

// --- LoadBalancer ---

const reqAnnotation = "history.cloudgate.test/request-id"

func (s *simCloud) lb(key string) *simLB {
	l := s.lbs[key]
	if l == nil {
		l = &simLB{}
		s.lbs[key] = l
	}
	return l
}

func lbHostname(key string, version int) string {
	return fmt.Sprintf("v%d.%s.sim.invalid", version, strings.NewReplacer("/", "-", ":", "-").Replace(key))
}

// extService is a Service whose load balancer another controller owns:
// every LoadBalancer call for it answers cloudprovider.ImplementedElsewhere.
const extService = "svc-ext"

func (s *simCloud) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	key := lbKeyOf(svc)
	if svc.Name == extService {
		s.mu.Lock()
		s.addFact("GetLoadBalancer", "GetLoadBalancer", key, factErr, "", cloudprovider.ImplementedElsewhere, 0)
		s.mu.Unlock()
		return nil, false, cloudprovider.ImplementedElsewhere
	}
	if err := s.call(ctx, "GetLoadBalancer", false); err != nil {
		s.mu.Lock()
		s.addFact("GetLoadBalancer", "GetLoadBalancer", key, factErr, "", err, 0)
		s.mu.Unlock()
		return nil, false, err
	}
	defer s.deliver(ctx)
	l := s.lb(key)
	if !l.exists {
		s.pendFact("GetLoadBalancer", "GetLoadBalancer", key, factPos, lbString(nil, false), nil, l.version)
		return nil, false, nil
	}
	st := &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{Hostname: lbHostname(key, l.version)}}}
	s.pendFact("GetLoadBalancer", "GetLoadBalancer", key, factPos, lbString(st, true), nil, l.version)
	return st, true, nil
}

func (s *simCloud) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return "lb-" + string(svc.UID)
}

// write runs one write: the round's fault, then apply. A failing write is
// sometimes applied before it fails (the cloud did it, the answer was lost).
func (s *simCloud) write(ctx context.Context, method, key, reqID string, apply func() int) error {
	s.mu.Lock()
	s.callCount[method]++
	err, hang := s.fault(false)
	appliedAnyway := err != nil && s.rng.Intn(3) == 0
	if strings.Contains(key, "/"+extService+"/") {
		err, hang, appliedAnyway = cloudprovider.ImplementedElsewhere, false, false
	}
	if err == nil && !hang {
		switch r := s.rng.Intn(20); {
		case r == 0: // a per-request answer: nothing done
			err = s.newErr("HTTP 400 InvalidParameterValue: %s %s", method, key)
		case r == 1 && method == "EnsureLoadBalancer": // done, not ready yet
			err, appliedAnyway = fmt.Errorf("sim: %w", api.NewRetryError("load balancer is still provisioning", 5*time.Second)), true
			s.errs[err] = true
		}
	}
	s.mu.Unlock()
	if hang {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-s.clk.After(simHangTimeout):
			err = context.DeadlineExceeded
		}
		s.mu.Lock()
		err = s.newErr("sim: %s: %w", method, err)
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := writeReceipt{reqID: reqID, method: method, key: key}
	if err == nil || appliedAnyway {
		r.applied, r.version = true, apply()
	}
	r.seq, r.at = s.stamp()
	s.receipts[reqID] = append(s.receipts[reqID], r)
	return err
}

func (s *simCloud) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) (*v1.LoadBalancerStatus, error) {
	key := lbKeyOf(svc)
	var st *v1.LoadBalancerStatus
	err := s.write(ctx, "EnsureLoadBalancer", key, svc.Annotations[reqAnnotation], func() int {
		l := s.lb(key)
		l.exists = true
		l.version++
		st = &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{Hostname: lbHostname(key, l.version)}}}
		return l.version
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (s *simCloud) UpdateLoadBalancer(ctx context.Context, _ string, svc *v1.Service, _ []*v1.Node) error {
	key := lbKeyOf(svc)
	return s.write(ctx, "UpdateLoadBalancer", key, svc.Annotations[reqAnnotation], func() int {
		l := s.lb(key)
		l.version++
		return l.version
	})
}

func (s *simCloud) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	key := lbKeyOf(svc)
	return s.write(ctx, "EnsureLoadBalancerDeleted", key, svc.Annotations[reqAnnotation], func() int {
		l := s.lb(key)
		l.exists = false
		l.version++
		return l.version
	})
}

// --- Routes ---

func (s *simCloud) routes(cluster string) *simRoutes {
	r := s.rts[cluster]
	if r == nil {
		r = &simRoutes{routes: map[string]string{}}
		s.rts[cluster] = r
	}
	return r
}

func (s *simCloud) ListRoutes(ctx context.Context, cluster string) ([]*cloudprovider.Route, error) {
	key := routeKey(cluster)
	if err := s.call(ctx, "ListRoutes", false); err != nil {
		s.mu.Lock()
		s.addFact("ListRoutes", "ListRoutes", key, factErr, "", err, 0)
		s.mu.Unlock()
		return nil, err
	}
	defer s.deliver(ctx)
	rt := s.routes(cluster)
	out := make([]*cloudprovider.Route, 0, len(rt.routes))
	for name, cidr := range rt.routes {
		out = append(out, &cloudprovider.Route{Name: name, TargetNode: types.NodeName(strings.TrimPrefix(name, "r-")), DestinationCIDR: cidr})
	}
	s.pendFact("ListRoutes", "ListRoutes", key, factPos, routesString(out), nil, rt.version)
	return out, nil
}

// CreateRoute carries its request ID in nameHint; the route's CIDR is the
// request ID too, so a listing shows which write made each route.
func (s *simCloud) CreateRoute(ctx context.Context, cluster, nameHint string, r *cloudprovider.Route) error {
	return s.write(ctx, "CreateRoute", routeKey(cluster), nameHint, func() int {
		rt := s.routes(cluster)
		rt.routes["r-"+string(r.TargetNode)] = r.DestinationCIDR
		rt.version++
		return rt.version
	})
}

// DeleteRoute carries its request ID in the route's DestinationCIDR.
func (s *simCloud) DeleteRoute(ctx context.Context, cluster string, r *cloudprovider.Route) error {
	return s.write(ctx, "DeleteRoute", routeKey(cluster), r.DestinationCIDR, func() int {
		rt := s.routes(cluster)
		delete(rt.routes, r.Name)
		rt.version++
		return rt.version
	})
}

// --- canonical value strings (answers are compared through these) ---

func addrString(a []v1.NodeAddress) string {
	parts := make([]string, len(a))
	for i, x := range a {
		parts[i] = string(x.Type) + "=" + x.Address
	}
	return strings.Join(parts, ",")
}

func mdString(m *cloudprovider.InstanceMetadata) string {
	if m == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s|%s|%s/%s|%s", m.ProviderID, m.InstanceType, m.Region, m.Zone, addrString(m.NodeAddresses))
}

func lbString(st *v1.LoadBalancerStatus, exists bool) string {
	if !exists {
		return "absent"
	}
	if st == nil {
		return "exists:<nil>"
	}
	hosts := make([]string, len(st.Ingress))
	for i, in := range st.Ingress {
		hosts[i] = in.Hostname + in.IP
	}
	return "exists:" + strings.Join(hosts, ",")
}

func routesString(rs []*cloudprovider.Route) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		if r == nil {
			parts = append(parts, "<nil>")
			continue
		}
		parts = append(parts, r.Name+"="+r.DestinationCIDR)
	}
	slices.Sort(parts)
	return "[" + strings.Join(parts, " ") + "]"
}

// comparableErr reports whether err can be compared with == (and be a map
// key) without panicking.
func comparableErr(err error) bool { return reflect.TypeOf(err).Comparable() }
