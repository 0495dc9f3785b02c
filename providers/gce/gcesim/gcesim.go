// Package gcesim is a simulated Compute Engine v1 REST endpoint (JSON over HTTP on
// 127.0.0.1) for the unmodified GCE cloud provider (k8s.io/cloud-provider-gcp/providers/gce),
// which reaches it through its own cloud config: api-endpoint = Server.APIEndpoint(),
// token-url = Server.TokenURL(). It answers the calls the provider makes for the node,
// node-lifecycle and route controllers — instances get/list/aggregatedList (filter,
// maxResults, pageToken), zones list/get, networks get, routes list/insert/delete and their
// global operations — and the metadata server's paths with 404 (the CCM is not on a VM),
// except the default service account's token, which the provider's token-url client needs.
//
// Every call is counted by method (Compute Engine's method names, e.g.
// "compute.instances.get"). A call it does not know is answered 404 with an error body
// naming it, counted under "unknown" and kept (Server.Unknown): tests fail on it.
//
// Quotas: Compute Engine enforces per-project rate quotas per group of methods, per minute,
// refilled at the start of each minute, and answers an exhausted group with 403
// rateLimitExceeded (docs/gce.md cites the page). The simulator keeps one such bucket per
// group (read: *.get; list: *.list and aggregatedList; operation reads; writes: the
// "Queries" group of mutations), each a Quota of requests per minute, on an injected clock.
package gcesim

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	compute "google.golang.org/api/compute/v1"
	"k8s.io/utils/clock"
)

// Instance statuses (Compute Engine's Instance.status).
const (
	StatusRunning    = "RUNNING"
	StatusStopping   = "STOPPING"
	StatusTerminated = "TERMINATED" // a stopped instance: it still exists
	StatusSuspended  = "SUSPENDED"
)

// Instance is one simulated VM.
type Instance struct {
	Name        string
	Zone        string
	MachineType string // e.g. "e2-standard-4"
	Status      string // "" is RUNNING
	InternalIP  string
	ExternalIP  string // "" for none
	IPv6        string // internal IPv6, "" for none
	ID          uint64 // 0: assigned
	// NoNetworkInterface lists the instance without its network interface, which the
	// provider's InstanceMetadata fails on while its InstanceExists answers.
	NoNetworkInterface bool
}

// Group is a Compute Engine rate-quota group.
type Group string

// The quota groups the simulator enforces, as the Compute Engine rate-quota page names them.
const (
	GroupRead      Group = "read"      // compute.googleapis.com/read_requests: *.get
	GroupList      Group = "list"      // compute.googleapis.com/list_requests: *.list, *.aggregatedList
	GroupOperation Group = "operation" // compute.googleapis.com/operation_read_requests
	GroupWrite     Group = "write"     // compute.googleapis.com/default ("Queries"): mutations
)

// DefaultPerMinute is the default quota per group and project per minute on the Compute Engine
// rate-quota page (Read, List, Operation read requests and Queries: 1,500 each). Projects
// can have other values: set Config.Quota.
const DefaultPerMinute = 1500

// Config configures a Server. The zero value of each field is documented.
type Config struct {
	Project string   // "" is "gcesim-project"
	Region  string   // "" is "us-central1"
	Zones   []string // zones of Region; nil is Region-a, -b, -c
	// Quota is the requests per minute per group; a missing group gets DefaultPerMinute,
	// a negative value turns that group's quota off.
	Quota map[Group]int
	// Status429 answers an exhausted quota with HTTP 429 RESOURCE_EXHAUSTED instead of
	// 403 rateLimitExceeded (both are seen from Google APIs).
	Status429 bool
	// Latency is added to every answer of a method ("compute.instances.get"), nil for none.
	Latency func(method string) time.Duration
	// PageSize caps maxResults; 0 is 500, Compute Engine's maximum.
	PageSize int
	// Clock times the quota windows; nil is the real clock.
	Clock clock.PassiveClock
}

// Server is a running simulator.
type Server struct {
	cfg   Config
	ln    net.Listener
	srv   *http.Server
	url   string
	token string

	mu        sync.Mutex
	instances map[string]*Instance // zone + "/" + name
	routes    map[string]*compute.Route
	ops       map[string]*compute.Operation
	nextID    uint64
	calls     map[string]int
	throttled map[string]int
	unknown   []string
	windows   map[Group]window
}

type window struct {
	start time.Time
	used  int
}

// Start starts a simulator on a free port of 127.0.0.1.
func Start(cfg Config) (*Server, error) {
	if cfg.Project == "" {
		cfg.Project = "gcesim-project"
	}
	if cfg.Region == "" {
		cfg.Region = "us-central1"
	}
	if len(cfg.Zones) == 0 {
		cfg.Zones = []string{cfg.Region + "-a", cfg.Region + "-b", cfg.Region + "-c"}
	}
	for _, z := range cfg.Zones {
		if !strings.HasPrefix(z, cfg.Region+"-") {
			return nil, fmt.Errorf("gcesim: zone %q is not in region %q: set Config.Zones to zones of Config.Region", z, cfg.Region)
		}
	}
	if cfg.PageSize <= 0 || cfg.PageSize > 500 {
		cfg.PageSize = 500
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("gcesim: %w", err)
	}
	s := &Server{
		cfg: cfg, ln: ln, url: "http://" + ln.Addr().String(), token: "gcesim-token",
		instances: map[string]*Instance{}, routes: map[string]*compute.Route{}, ops: map[string]*compute.Operation{},
		nextID: 1000, calls: map[string]int{}, throttled: map[string]int{}, windows: map[Group]window{},
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // ends with Close
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// URL is the server's base URL.
func (s *Server) URL() string { return s.url }

// APIEndpoint is the provider's api-endpoint: the compute v1 base path, ending in "/".
func (s *Server) APIEndpoint() string { return s.url + "/compute/v1/" }

// TokenURL is the provider's token-url: an alternate token source answering an access token.
func (s *Server) TokenURL() string { return s.url + "/token" }

// MetadataHost is a GCE_METADATA_HOST value pointing the metadata client at this server,
// which answers 404 to every metadata path (no metadata server) but the default service
// account's token.
func (s *Server) MetadataHost() string { return strings.TrimPrefix(s.url, "http://") }

// Project, Region and Zones are the simulated project's.
func (s *Server) Project() string { return s.cfg.Project }
func (s *Server) Region() string  { return s.cfg.Region }
func (s *Server) Zones() []string { return append([]string(nil), s.cfg.Zones...) }

// ProviderID is the GCE provider's ID for an instance.
func (s *Server) ProviderID(zone, name string) string {
	return "gce://" + s.cfg.Project + "/" + zone + "/" + name
}

// Put adds or replaces an instance.
func (s *Server) Put(in Instance) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.ID == 0 {
		s.nextID++
		in.ID = s.nextID
	}
	if in.Status == "" {
		in.Status = StatusRunning
	}
	s.instances[in.Zone+"/"+in.Name] = &in
}

// Remove deletes an instance; it reports whether there was one.
func (s *Server) Remove(zone, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.instances[zone+"/"+name]
	delete(s.instances, zone+"/"+name)
	return ok
}

// SetStatus sets an instance's status; it reports whether there is one.
func (s *Server) SetStatus(zone, name, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.instances[zone+"/"+name]
	if ok {
		in.Status = status
	}
	return ok
}

// Calls returns the calls answered so far by method, throttled ones included.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyMap(s.calls)
}

// Throttled returns the calls answered with a quota error, by method.
func (s *Server) Throttled() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return copyMap(s.throttled)
}

// Unknown returns the calls the simulator does not know ("GET /path?query"), in order.
func (s *Server) Unknown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unknown...)
}

// Routes returns the routes, sorted by name.
func (s *Server) Routes() []compute.Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]compute.Route, 0, len(s.routes))
	for _, r := range s.routes {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func copyMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// ServeHTTP answers one call.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch {
	case p == "/token" && r.Method == http.MethodPost:
		s.count("token")
		writeJSON(w, http.StatusOK, map[string]any{"accessToken": s.token, "expireTime": s.cfg.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		return
	case p == "/computeMetadata/v1/instance/service-accounts/default/token":
		// The provider's alternate token source (token-url) posts through an HTTP client
		// authorised by the metadata server's default service account token.
		s.count("metadata.token")
		w.Header().Set("Metadata-Flavor", "Google")
		writeJSON(w, http.StatusOK, map[string]any{"access_token": "gcesim-metadata-token", "expires_in": 3600, "token_type": "Bearer"})
		return
	case strings.HasPrefix(p, "/computeMetadata/"):
		s.count("metadata")
		w.Header().Set("Metadata-Flavor", "Google")
		http.Error(w, "gcesim: no metadata server", http.StatusNotFound)
		return
	}
	prefix := "/compute/v1/projects/" + s.cfg.Project + "/"
	if !strings.HasPrefix(p, prefix) {
		s.unknownCall(w, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		s.count("unauthenticated")
		writeError(w, http.StatusUnauthorized, "Request is missing required authentication credential.", "required", "UNAUTHENTICATED")
		return
	}
	parts := strings.Split(strings.TrimPrefix(p, prefix), "/")
	h, method, group := s.route(r.Method, parts)
	if h == nil {
		s.unknownCall(w, r)
		return
	}
	if d := s.latency(method); d > 0 {
		time.Sleep(d)
	}
	if !s.admit(method, group) {
		s.quotaError(w, group)
		return
	}
	h(w, r, parts)
}

type handler func(w http.ResponseWriter, r *http.Request, parts []string)

// route maps a path under projects/PROJECT/ to its handler, method name and quota group.
func (s *Server) route(verb string, parts []string) (handler, string, Group) {
	n := len(parts)
	switch {
	case verb == http.MethodGet && n == 4 && parts[0] == "zones" && parts[2] == "instances":
		return s.getInstance, "compute.instances.get", GroupRead
	case verb == http.MethodGet && n == 3 && parts[0] == "zones" && parts[2] == "instances":
		return s.listInstances, "compute.instances.list", GroupList
	case verb == http.MethodGet && n == 2 && parts[0] == "aggregated" && parts[1] == "instances":
		return s.aggregatedInstances, "compute.instances.aggregatedList", GroupList
	case verb == http.MethodGet && n == 1 && parts[0] == "zones":
		return s.listZones, "compute.zones.list", GroupList
	case verb == http.MethodGet && n == 2 && parts[0] == "zones":
		return s.getZone, "compute.zones.get", GroupRead
	case verb == http.MethodGet && n == 3 && parts[0] == "global" && parts[1] == "networks":
		return s.getNetwork, "compute.networks.get", GroupRead
	case verb == http.MethodGet && n == 2 && parts[0] == "global" && parts[1] == "routes":
		return s.listRoutes, "compute.routes.list", GroupList
	case verb == http.MethodPost && n == 2 && parts[0] == "global" && parts[1] == "routes":
		return s.insertRoute, "compute.routes.insert", GroupWrite
	case verb == http.MethodDelete && n == 3 && parts[0] == "global" && parts[1] == "routes":
		return s.deleteRoute, "compute.routes.delete", GroupWrite
	case verb == http.MethodGet && n == 3 && parts[0] == "global" && parts[1] == "operations":
		return s.getOperation, "compute.globalOperations.get", GroupOperation
	case verb == http.MethodPost && n == 4 && parts[0] == "global" && parts[1] == "operations" && parts[3] == "wait":
		return s.getOperation, "compute.globalOperations.wait", GroupOperation
	}
	return nil, "", ""
}

func (s *Server) latency(method string) time.Duration {
	if s.cfg.Latency == nil {
		return 0
	}
	return s.cfg.Latency(method)
}

func (s *Server) count(method string) {
	s.mu.Lock()
	s.calls[method]++
	s.mu.Unlock()
}

func (s *Server) unknownCall(w http.ResponseWriter, r *http.Request) {
	call := r.Method + " " + r.URL.RequestURI()
	s.mu.Lock()
	s.calls["unknown"]++
	s.unknown = append(s.unknown, call)
	s.mu.Unlock()
	writeError(w, http.StatusNotFound, "gcesim: unknown call "+call, "notFound", "NOT_FOUND")
}

// admit counts the call and takes a token from its group's bucket, which holds the group's
// quota and is refilled whole at the start of each minute of the clock.
func (s *Server) admit(method string, g Group) bool {
	limit, ok := s.cfg.Quota[g]
	if !ok {
		limit = DefaultPerMinute
	}
	now := s.cfg.Clock.Now().Truncate(time.Minute)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method]++
	if limit < 0 {
		return true
	}
	win := s.windows[g]
	if !win.start.Equal(now) {
		win = window{start: now}
	}
	if win.used >= limit {
		s.throttled[method]++
		return false
	}
	win.used++
	s.windows[g] = win
	return true
}

var groupNames = map[Group][2]string{
	GroupRead:      {"Read requests", "Read requests per minute"},
	GroupList:      {"List requests", "List requests per minute"},
	GroupOperation: {"Operation read requests", "Operation read requests per minute"},
	GroupWrite:     {"Queries", "Queries per minute"},
}

func (s *Server) quotaError(w http.ResponseWriter, g Group) {
	n := groupNames[g]
	msg := fmt.Sprintf("Quota exceeded for quota metric '%s' and limit '%s' of service 'compute.googleapis.com' for consumer 'project_number:%s'.", n[0], n[1], s.cfg.Project)
	if s.cfg.Status429 {
		writeError(w, http.StatusTooManyRequests, msg, "rateLimitExceeded", "RESOURCE_EXHAUSTED")
		return
	}
	writeError(w, http.StatusForbidden, msg, "rateLimitExceeded", "PERMISSION_DENIED")
}

// writeError writes Google's JSON error body: {"error": {code, message, errors: [{message,
// domain, reason}], status}}.
func writeError(w http.ResponseWriter, code int, msg, reason, status string) {
	domain := "global"
	if reason == "rateLimitExceeded" {
		domain = "usageLimits"
	}
	writeJSON(w, code, map[string]any{"error": map[string]any{
		"code": code, "message": msg, "status": status,
		"errors": []map[string]string{{"message": msg, "domain": domain, "reason": reason}},
	}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client sees a short body
}

func (s *Server) selfLink(rel string) string {
	return s.APIEndpoint() + "projects/" + s.cfg.Project + "/" + rel
}

func (s *Server) hasZone(z string) bool {
	for _, x := range s.cfg.Zones {
		if x == z {
			return true
		}
	}
	return false
}

func (s *Server) notFound(w http.ResponseWriter, rel string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("The resource 'projects/%s/%s' was not found", s.cfg.Project, rel), "notFound", "NOT_FOUND")
}

func (s *Server) badRequest(w http.ResponseWriter, msg string) {
	s.mu.Lock()
	s.unknown = append(s.unknown, "invalid: "+msg)
	s.mu.Unlock()
	writeError(w, http.StatusBadRequest, msg, "invalid", "INVALID_ARGUMENT")
}

func (s *Server) getZone(w http.ResponseWriter, _ *http.Request, parts []string) {
	if !s.hasZone(parts[1]) {
		s.notFound(w, "zones/"+parts[1])
		return
	}
	writeJSON(w, http.StatusOK, s.zone(parts[1]))
}

func (s *Server) zone(z string) *compute.Zone {
	return &compute.Zone{Kind: "compute#zone", Name: z, Status: "UP", Region: s.selfLink("regions/" + s.cfg.Region), SelfLink: s.selfLink("zones/" + z)}
}

func (s *Server) listZones(w http.ResponseWriter, r *http.Request, _ []string) {
	if f := r.URL.Query().Get("filter"); f != "" {
		s.badRequest(w, "gcesim: zones.list filter is not simulated: "+f)
		return
	}
	list := &compute.ZoneList{Kind: "compute#zoneList", SelfLink: s.selfLink("zones")}
	for _, z := range s.cfg.Zones {
		list.Items = append(list.Items, s.zone(z))
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) getNetwork(w http.ResponseWriter, _ *http.Request, parts []string) {
	writeJSON(w, http.StatusOK, &compute.Network{
		Kind: "compute#network", Name: parts[2], SelfLink: s.selfLink("global/networks/" + parts[2]),
		AutoCreateSubnetworks: true, ForceSendFields: []string{"AutoCreateSubnetworks"},
	})
}

// page parses maxResults and pageToken: the offset to start at and the page's size.
func (s *Server) page(w http.ResponseWriter, r *http.Request) (offset, size int, ok bool) {
	q := r.URL.Query()
	size = s.cfg.PageSize
	if v := q.Get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 500 {
			s.badRequest(w, "Invalid value for field 'maxResults': '"+v+"'. Must be in the range [0, 500].")
			return 0, 0, false
		}
		if n > 0 && n < size {
			size = n
		}
	}
	if t := q.Get("pageToken"); t != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(t, "gcesim-"))
		if err != nil || !strings.HasPrefix(t, "gcesim-") || n < 0 {
			s.badRequest(w, "Invalid value for field 'pageToken': '"+t+"'.")
			return 0, 0, false
		}
		offset = n
	}
	return offset, size, true
}

func nextToken(offset, size, total int) string {
	if offset+size >= total {
		return ""
	}
	return "gcesim-" + strconv.Itoa(offset+size)
}
