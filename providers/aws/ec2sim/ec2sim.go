// Package ec2sim is a simulated Amazon EC2 endpoint on 127.0.0.1 that speaks
// the EC2 Query API the AWS SDK for Go v2 uses (form-encoded Action=...,
// XML answers in the 2016-11-15 namespace), for the calls the AWS cloud
// provider makes on the node and node-lifecycle paths: DescribeInstances,
// DescribeAvailabilityZones and DescribeInstanceTopology.
//
// It throttles as EC2 documents: a token bucket per API action, per account
// and Region, which every client of the account draws from: a request's
// account is the access key ID its SigV4 Authorization header names, mapped
// by Config.Accounts (an unmapped key is an account of its own) ("Request throttling for the Amazon EC2 API",
// https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html:
// each request takes one token from its action's bucket; a non-mutating
// action such as DescribeHosts has a bucket of 100 tokens refilled at 20 per
// second). A request over the limit gets HTTP 503 with the error code
// RequestLimitExceeded, which the SDK's standard retryer retries. Every
// request is counted per action, exactly, as received, throttled and
// answered.
//
// It also tags instances (CreateTags, DeleteTags: the tagging controller's
// calls, tags.go), describes the Region's subnets and route tables
// (network.go), keeps security groups with their ingress rules
// (securitygroups.go), and answers the route controller's calls: CreateRoute
// and DeleteRoute on the route tables, with a route to an instance EC2 no
// longer runs answered as a blackhole, and ModifyInstanceAttribute for the
// source/destination check (routes.go). With the provider's ELB and ELBv2
// ServiceOverrides pointing here, it answers the classic ELB (elb.go) and
// network load balancer (elbv2.go) Query APIs the provider's service
// controller calls; a request's Version tells the three APIs apart. Every
// other action is out of scope: it gets InvalidAction, which fails the
// caller. Every request must be signed (SigV4) with a known key: sigv4.go.
package ec2sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// APIVersion is the EC2 API version the SDK for Go v2 sends
// (Version=2016-11-15); Namespace is its XML namespace.
const (
	APIVersion = "2016-11-15"
	Namespace  = "http://ec2.amazonaws.com/doc/" + APIVersion + "/"
)

// Instance states and their EC2 state codes.
const (
	StatePending      = "pending"
	StateRunning      = "running"
	StateShuttingDown = "shutting-down"
	StateTerminated   = "terminated"
	StateStopping     = "stopping"
	StateStopped      = "stopped"
)

var stateCodes = map[string]int{
	StatePending: 0, StateRunning: 16, StateShuttingDown: 32,
	StateTerminated: 48, StateStopping: 64, StateStopped: 80,
}

// NetworkInterface is one elastic network interface of an instance.
type NetworkInterface struct {
	DeviceIndex int
	// Status is "in-use" for an attached interface (the provider only reads
	// addresses of in-use interfaces).
	Status        string
	PrivateIPs    []string // the first one is the primary address
	IPv6Addresses []string
}

// Instance is one simulated EC2 instance.
type Instance struct {
	ID             string // i-0123456789abcdef0
	Type           string // m5.large
	Zone           string // us-east-1a
	State          string // one of the State* constants; "" means running
	PrivateDNSName string
	PublicDNSName  string
	PrivateIP      string
	PublicIP       string
	VPCID          string
	SubnetID       string
	Interfaces     []NetworkInterface
	Tags           map[string]string
	// SecurityGroupIDs are the instance's security groups: the provider
	// opens a load balancer's ports to the nodes in them.
	SecurityGroupIDs []string
	// NetworkNodes is what DescribeInstanceTopology answers for the
	// instance (top layer first); empty: the instance has no topology.
	NetworkNodes []string
	// SourceDestCheckDisabled: ModifyInstanceAttribute turned the
	// instance's source/destination check off, as the provider does for
	// a route's target (the zero value is EC2's default: checked).
	SourceDestCheckDisabled bool
}

// Zone is one availability zone of the simulated Region.
type Zone struct {
	Name string // us-east-1a
	ID   string // use1-az1
	Type string // availability-zone, local-zone, wavelength-zone
}

// Bucket is one action's token bucket.
type Bucket struct {
	Size   int     // maximum tokens (burst)
	Refill float64 // tokens added per second
}

// NonMutatingBucket is the documented bucket of a non-mutating action.
var NonMutatingBucket = Bucket{Size: 100, Refill: 20}

// Config configures a simulated endpoint.
type Config struct {
	Region string
	Zones  []Zone
	// Buckets sets an action's bucket; actions not listed get Default.
	Buckets map[string]Bucket
	// Default is the bucket of every action without its own (zero value:
	// NonMutatingBucket). Unthrottled disables throttling entirely.
	Default     Bucket
	Unthrottled bool
	// Topology makes DescribeInstanceTopology answer; when false it answers
	// UnsupportedOperation, as in a Region without the API.
	Topology bool
	// Latency is the simulated service time per action (zero: none).
	Latency Latency
	// Subnets are what DescribeSubnets answers; RouteTables are the
	// Region's route tables, whose routes CreateRoute and DeleteRoute then
	// change (routes.go).
	Subnets     []Subnet
	RouteTables []RouteTable
	// SecurityGroups are the groups the Region starts with.
	SecurityGroups []SecurityGroup
	// Credentials are the access keys (key ID → secret) whose SigV4
	// signatures the simulator accepts (sigv4.go); nil: the fixed test pair
	// AccessKeyID, SecretAccessKey, and each key Accounts names with that
	// secret.
	Credentials map[string]string
	// Accounts maps an access key ID to its account: the keys of one
	// account share its buckets, as the IAM users and roles of one AWS
	// account do. A key not listed is an account of its own; a request
	// without a SigV4 Authorization header belongs to the account "".
	Accounts map[string]string
	// Clock is the time Launch's visibility lag is measured on (nil:
	// time.Now).
	Clock func() time.Time
}

// ActionStats are the exact counters of one action.
type ActionStats struct {
	Requests  int64 // every request received
	Throttled int64 // answered 503 RequestLimitExceeded
	Errors    int64 // answered another error
	// Invalid counts the InvalidAction answers among Errors: an action the
	// simulator does not answer, which a benchmark must treat as a failed run.
	Invalid int64
	// Retries counts the requests among Requests that an AWS SDK sent
	// again after a failed attempt (its Amz-Sdk-Request header says
	// attempt=2 or more): Requests - Retries is what the caller asked for.
	Retries int64
	// Items is the number of instances (or zones, topologies, subnets,
	// route tables) returned, or of resources (instances, routes) changed.
	Items int64
}

// Server is a running simulated endpoint.
type Server struct {
	// URL is the endpoint (http://127.0.0.1:PORT/) for a [ServiceOverride].
	URL string

	cfg      Config
	srv      *http.Server
	listener net.Listener
	done     chan struct{}

	mu        sync.RWMutex
	instances map[string]*Instance
	groups    []*SecurityGroup // creation order
	groupSeq  int
	ingress   map[string][]rule       // by group ID
	elbs      map[string]*classicLB   // by name (elb.go)
	nlbs      map[string]*networkLB   // by ARN (elbv2.go)
	tgs       map[string]*targetGroup // by ARN
	elbSeq    int                     // IDs of load balancers, target groups, listeners
	tables    []*RouteTable           // Config order; their routes change (routes.go)

	// hidden: instances Launch made invisible to DescribeInstances until
	// the time given (EC2's eventual consistency after RunInstances).
	hidden map[string]time.Time

	bucketsMu sync.Mutex
	buckets   map[string]*rate.Limiter // by account + "/" + action

	statsMu sync.Mutex
	stats   map[string]*ActionStats
	callers map[string]map[string]*ActionStats // by access key ID, then action
	shapes  map[string]DescribeShape           // DescribeInstances by shape (describe.go)

	requestSeq atomic.Uint64
	latency    *latencyModel // nil: no latency
}

// Start listens on a free 127.0.0.1 port and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Region == "" {
		return nil, fmt.Errorf("ec2sim: Config.Region is required (e.g. us-east-1)")
	}
	if cfg.Default == (Bucket{}) {
		cfg.Default = NonMutatingBucket
	}
	for name, b := range cfg.Buckets {
		if b.Size < 1 || b.Refill <= 0 {
			return nil, fmt.Errorf("ec2sim: Config.Buckets[%q]: Size must be >= 1 and Refill > 0 (got %d, %g)", name, b.Size, b.Refill)
		}
	}
	if cfg.Default.Size < 1 || cfg.Default.Refill <= 0 {
		return nil, fmt.Errorf("ec2sim: Config.Default: Size must be >= 1 and Refill > 0 (got %d, %g)", cfg.Default.Size, cfg.Default.Refill)
	}
	if err := cfg.Latency.validate(); err != nil {
		return nil, err
	}
	for key, acct := range cfg.Accounts {
		if key == "" || acct == "" {
			return nil, fmt.Errorf("ec2sim: Config.Accounts: an access key ID and its account must both be non-empty (got %q: %q)", key, acct)
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:       "http://" + l.Addr().String() + "/",
		cfg:       cfg,
		listener:  l,
		done:      make(chan struct{}),
		instances: map[string]*Instance{},
		elbs:      map[string]*classicLB{},
		nlbs:      map[string]*networkLB{},
		tgs:       map[string]*targetGroup{},
		hidden:    map[string]time.Time{},
		buckets:   map[string]*rate.Limiter{},
		stats:     map[string]*ActionStats{},
		callers:   map[string]map[string]*ActionStats{},
		shapes:    map[string]DescribeShape{},
		latency:   newLatencyModel(cfg.Latency),
	}
	for _, rt := range cfg.RouteTables {
		rt.SubnetIDs = slices.Clone(rt.SubnetIDs)
		rt.Routes = slices.Clone(rt.Routes)
		rt.Tags = maps.Clone(rt.Tags)
		s.tables = append(s.tables, &rt)
	}
	for _, g := range cfg.SecurityGroups {
		g.Tags = maps.Clone(g.Tags)
		s.groups = append(s.groups, &g)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(l)
	}()
	return s, nil
}

// Close stops the server and waits for it.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Put adds or replaces instances.
func (s *Server) Put(insts ...Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range insts {
		in := in
		if in.State == "" {
			in.State = StateRunning
		}
		s.instances[in.ID] = &in
	}
}

// Launch adds instances as RunInstances does, with EC2's eventual
// consistency: DescribeInstances does not know them (a lookup by ID answers
// InvalidInstanceID.NotFound, a filter or list leaves them out) until lag
// has passed on Config.Clock. Every other action sees them at once.
func (s *Server) Launch(lag time.Duration, insts ...Instance) {
	s.Put(insts...)
	if lag <= 0 {
		return
	}
	until := s.cfg.Clock().Add(lag)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range insts {
		s.hidden[in.ID] = until
	}
}

// visible says whether DescribeInstances shows the instance at now. The
// caller holds s.mu (read or write).
func (s *Server) visible(id string, now time.Time) bool {
	until, ok := s.hidden[id]
	return !ok || !now.Before(until)
}

// SetState changes an instance's state; it reports whether the instance exists.
func (s *Server) SetState(id, state string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[id]
	if ok {
		in.State = state
	}
	return ok
}

// Remove deletes an instance: EC2 no longer knows it (a terminated instance
// after its retention, or an ID that never existed).
func (s *Server) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.instances, id)
	delete(s.hidden, id)
}

// Stats returns a copy of the counters of one action.
func (s *Server) Stats(action string) ActionStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	if st := s.stats[action]; st != nil {
		return *st
	}
	return ActionStats{}
}

// AllStats returns a copy of every action's counters.
func (s *Server) AllStats() map[string]ActionStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	out := make(map[string]ActionStats, len(s.stats))
	for k, v := range s.stats {
		out[k] = *v
	}
	return out
}

// CallerStats returns a copy of the counters of the requests signed with
// one access key ID, by action (AllStats counts every caller together).
func (s *Server) CallerStats(accessKey string) map[string]ActionStats {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	out := make(map[string]ActionStats, len(s.callers[accessKey]))
	for k, v := range s.callers[accessKey] {
		out[k] = *v
	}
	return out
}

// ResetStats zeroes every counter (the buckets keep their tokens).
func (s *Server) ResetStats() {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	s.stats = map[string]*ActionStats{}
	s.callers = map[string]map[string]*ActionStats{}
	s.shapes = map[string]DescribeShape{}
}

// count applies f to the action's counters, overall and the caller's.
func (s *Server) count(caller, action string, f func(*ActionStats)) {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	st := s.stats[action]
	if st == nil {
		st = &ActionStats{}
		s.stats[action] = st
	}
	f(st)
	by := s.callers[caller]
	if by == nil {
		by = map[string]*ActionStats{}
		s.callers[caller] = by
	}
	st = by[action]
	if st == nil {
		st = &ActionStats{}
		by[action] = st
	}
	f(st)
}

// accessKey is the access key ID a SigV4 Authorization header names
// ("AWS4-HMAC-SHA256 Credential=AKID/date/region/service/aws4_request, ...");
// "" without one. The signature is not checked: the key only says whose
// buckets a request draws from.
func accessKey(r *http.Request) string {
	h := r.Header.Get("Authorization")
	_, cred, ok := strings.Cut(h, "Credential=")
	if !ok {
		return ""
	}
	key, _, _ := strings.Cut(cred, "/")
	return strings.TrimSpace(key)
}

// sdkRetry reports whether an AWS SDK sent the request again after a failed
// attempt: its Amz-Sdk-Request header ("attempt=N; max=M") has N > 1.
func sdkRetry(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Amz-Sdk-Request"), ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "attempt="); ok {
			return v != "1" && v != "" && v != "0"
		}
	}
	return false
}

// account is the account an access key ID belongs to.
func (s *Server) account(key string) string {
	if a, ok := s.cfg.Accounts[key]; ok {
		return a
	}
	return key
}

// allow takes one token from the account's bucket for the action.
func (s *Server) allow(account, action string) bool {
	if s.cfg.Unthrottled {
		return true
	}
	s.bucketsMu.Lock()
	lim := s.buckets[account+"/"+action]
	if lim == nil {
		b, ok := s.cfg.Buckets[action]
		if !ok {
			b = s.cfg.Default
		}
		lim = rate.NewLimiter(rate.Limit(b.Refill), b.Size)
		s.buckets[account+"/"+action] = lim
	}
	s.bucketsMu.Unlock()
	return lim.Allow()
}

// apiError is an EC2 error answer.
type apiError struct {
	status  int
	code    string
	message string
}

func (e *apiError) Error() string { return e.code + ": " + e.message }

func badRequest(code, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, code: code, message: fmt.Sprintf(format, args...)}
}

// ServeHTTP answers one Query API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	authErr := s.authenticate(r) // sigv4.go; answered once the API is known
	if err := r.ParseForm(); err != nil {
		s.writeError(w, badRequest("MalformedQueryString", "%v", err))
		return
	}
	action := r.Form.Get("Action")
	api := apiEC2
	switch r.Form.Get("Version") {
	case "", APIVersion:
	case ELBAPIVersion:
		api = apiELB
	case ELBv2APIVersion:
		api = apiELBv2
	default:
		api = apiOther
	}
	key := api.key(action)
	caller := accessKey(r)
	retry := sdkRetry(r)
	s.count(caller, key, func(st *ActionStats) {
		st.Requests++
		if retry {
			st.Retries++
		}
	})
	if authErr != nil {
		// Refused before the action's bucket, as AWS authenticates first.
		s.count(caller, key, func(st *ActionStats) { st.Errors++ })
		if api == apiEC2 {
			s.writeError(w, authErr.apiError(api))
		} else {
			s.writeQueryError(w, authErr.apiError(api))
		}
		return
	}
	if api == apiOther {
		// Another Query API sent here by a ServiceOverride: none of it is
		// simulated, and the error is in the Query APIs' shared format so
		// that its SDK client reads the code.
		s.count(caller, key, func(st *ActionStats) { st.Errors++; st.Invalid++ })
		s.writeQueryError(w, badRequest("InvalidAction", "The action %s is not valid for this web service (API version %s is not simulated).", action, r.Form.Get("Version")))
		return
	}
	if !s.allow(s.account(caller), key) {
		s.count(caller, key, func(st *ActionStats) { st.Throttled++ })
		wait(r.Context(), s.latency.draw(key, 0))
		if api == apiEC2 {
			s.writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "RequestLimitExceeded", message: "Request limit exceeded."})
		} else {
			// The load balancing APIs throttle with 400 Throttling, which
			// the SDK's standard retryer also retries.
			s.writeQueryError(w, &apiError{status: http.StatusBadRequest, code: "Throttling", message: "Rate exceeded"})
		}
		return
	}
	var (
		body  any
		items int
		err   *apiError
	)
	switch api {
	case apiELB:
		body, items, err = s.serveELB(action, r)
	case apiELBv2:
		body, items, err = s.serveELBv2(action, r)
	default:
		body, items, err = s.serveEC2(action, r)
	}
	if err != nil {
		s.count(caller, key, func(st *ActionStats) {
			st.Errors++
			if err.code == "InvalidAction" {
				st.Invalid++
			}
		})
		wait(r.Context(), s.latency.draw(key, 0))
		if api == apiEC2 {
			s.writeError(w, err)
		} else {
			s.writeQueryError(w, err)
		}
		return
	}
	s.count(caller, key, func(st *ActionStats) { st.Items += int64(items) })
	wait(r.Context(), s.latency.draw(key, items))
	out, merr := xml.Marshal(body)
	if merr != nil {
		s.writeError(w, &apiError{status: http.StatusInternalServerError, code: "InternalError", message: merr.Error()})
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

// serveEC2 answers one EC2 action.
func (s *Server) serveEC2(action string, r *http.Request) (body any, items int, err *apiError) {
	switch action {
	case "DescribeInstances":
		return s.describeInstances(r)
	case "DescribeAvailabilityZones":
		return s.describeAvailabilityZones(r)
	case "DescribeInstanceTopology":
		return s.describeInstanceTopology(r)
	case "DescribeSubnets": // network.go
		return s.describeSubnets(r)
	case "DescribeRouteTables":
		return s.describeRouteTables(r)
	case "DescribeSecurityGroups": // securitygroups.go
		return s.describeSecurityGroups(r)
	case "CreateSecurityGroup":
		return s.createSecurityGroup(r)
	case "AuthorizeSecurityGroupIngress":
		return s.authorizeIngress(r)
	case "RevokeSecurityGroupIngress":
		return s.revokeIngress(r)
	case "DeleteSecurityGroup":
		return s.deleteSecurityGroup(r)
	case "CreateTags", "DeleteTags": // tags.go
		return s.tags(r, action == "CreateTags")
	case "CreateRoute": // routes.go
		return s.createRoute(r)
	case "DeleteRoute":
		return s.deleteRoute(r)
	case "ModifyInstanceAttribute":
		return s.modifyInstanceAttribute(r)
	case "":
		return nil, 0, badRequest("MissingAction", "The request must contain the parameter Action")
	}
	return nil, 0, badRequest("InvalidAction", "The action %s is not valid for this web service.", action)
}

// errorResponse is EC2's error document (<Response><Errors><Error>...).
type errorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Code      string   `xml:"Errors>Error>Code"`
	Message   string   `xml:"Errors>Error>Message"`
	RequestID string   `xml:"RequestID"`
}

func (s *Server) writeError(w http.ResponseWriter, e *apiError) {
	out, _ := xml.Marshal(errorResponse{Code: e.code, Message: e.message, RequestID: s.requestID()})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

// queryErrorResponse is the error document of the other Query APIs (ELB,
// ELBv2: <ErrorResponse><Error><Code>...).
type queryErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

func (s *Server) writeQueryError(w http.ResponseWriter, e *apiError) {
	out, _ := xml.Marshal(queryErrorResponse{Type: "Sender", Code: e.code, Message: e.message, RequestID: s.requestID()})
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(out)
}

func (s *Server) requestID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%08d", hex.EncodeToString(b[:]), s.requestSeq.Add(1))
}

// sortedIDs returns the instance IDs in a stable order (pagination relies on it).
func sortedIDs(m map[string]*Instance) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
