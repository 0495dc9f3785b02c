package simcloud

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Server is a simulated cloud API listening on a loopback address. All its
// methods are safe for concurrent use.
type Server struct {
	cfg ServerConfig
	ln  net.Listener
	srv *http.Server
	url string
	// handler serves the API; Transport calls it in memory.
	handler http.Handler

	// quotaMu makes the check-and-take of a bucket and the computation of
	// its Retry-After one atomic step.
	quotaMu  sync.Mutex
	readLim  *rate.Limiter // nil: unlimited
	writeLim *rate.Limiter // nil: unlimited

	// drawMu guards the draw counts and the faults, so each call's draws
	// and the faults they are compared with are taken together.
	drawMu sync.Mutex
	drawN  map[string]uint64 // calls so far by draw key
	faults Faults

	cntMu    sync.Mutex
	counters Counters

	data *store

	lifeMu    sync.Mutex
	closed    bool
	inflight  sync.WaitGroup
	closing   chan struct{}
	serveDone chan struct{}
	closeOnce sync.Once
}

// NewServer validates cfg, applies its defaults and starts serving on
// cfg.Addr (default 127.0.0.1 on a free port). Call Close when done.
func NewServer(cfg ServerConfig) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:       cfg,
		drawN:     map[string]uint64{},
		faults:    cfg.Faults,
		closing:   make(chan struct{}),
		serveDone: make(chan struct{}),
		data:      newStore(cfg),
	}
	if cfg.ReadQPS > 0 {
		s.readLim = rate.NewLimiter(rate.Limit(cfg.ReadQPS), cfg.ReadBurst)
	}
	if cfg.WriteQPS > 0 {
		s.writeLim = rate.NewLimiter(rate.Limit(cfg.WriteQPS), cfg.WriteBurst)
	}
	s.counters = newCounters()

	s.handler = s.routes()
	if cfg.InMemory {
		// No listener: a goroutine blocked on a socket is never durably
		// blocked, so a synctest bubble's clock would stall on it.
		s.url = "http://simcloud.in-memory"
		close(s.serveDone)
		return s, nil
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("simcloud: listen on ServerConfig.Addr %q: %w", cfg.Addr, err)
	}
	s.ln = ln
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return s, nil
}

// URL is the base URL of the API, e.g. "http://127.0.0.1:41234".
func (s *Server) URL() string { return s.url }

// Transport returns an http.RoundTripper that serves each request by
// calling the server's handler in the caller's goroutine, with no socket:
// the transport of a server with ServerConfig.InMemory (it also works on a
// listening server). The response is complete when RoundTrip returns; a
// request whose context ends first gets the context's error.
func (s *Server) Transport() http.RoundTripper { return memTransport{h: s.handler} }

type memTransport struct{ h http.Handler }

func (t memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	sreq := req.Clone(req.Context())
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:0"
	sreq.Host = req.URL.Host
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, sreq)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// Config returns the server's configuration with defaults applied. Its
// Faults field is the initial faults; see Faults for the current ones.
func (s *Server) Config() ServerConfig {
	c := s.cfg
	c.Zones = append([]string(nil), c.Zones...)
	c.Clusters = append([]string(nil), c.Clusters...)
	return c
}

// Close stops the server: it stops accepting connections, ends hanging and
// sleeping calls (they answer 503), closes open connections and waits for
// every handler to return. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.lifeMu.Lock()
		s.closed = true
		s.lifeMu.Unlock()
		close(s.closing)
		if s.srv != nil {
			_ = s.srv.Close()
		}
		s.inflight.Wait()
		<-s.serveDone
	})
}

// SetFaults replaces the faults in force. Calls that already arrived keep
// the faults they drew against. It returns an error naming the first
// invalid field and then changes nothing.
func (s *Server) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	s.drawMu.Lock()
	s.faults = f
	s.drawMu.Unlock()
	return nil
}

// Faults returns the faults in force.
func (s *Server) Faults() Faults {
	s.drawMu.Lock()
	defer s.drawMu.Unlock()
	return s.faults
}

// enter registers a handler as in flight; false once Close has begun.
func (s *Server) enter() bool {
	s.lifeMu.Lock()
	defer s.lifeMu.Unlock()
	if s.closed {
		return false
	}
	s.inflight.Add(1)
	return true
}

// draws are one call's random numbers, each uniform in [0, 1).
type draws struct {
	jitter, errorP, timeoutP, spikeP float64
}

// draw takes a call's four draws, always all four in the same order, and
// the faults in force. The draws come from a source seeded with the seed,
// the call's key (method and URL) and how many calls with that key came
// before: not from one shared sequence, so that two calls arriving at the
// same instant in either order (goroutine scheduling) draw the same
// numbers, and a reordering does not shift every later call's draws.
func (s *Server) draw(key string) (draws, Faults) {
	s.drawMu.Lock()
	n := s.drawN[key]
	s.drawN[key] = n + 1
	f := s.faults
	s.drawMu.Unlock()
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	rng := rand.New(rand.NewPCG(uint64(s.cfg.Seed)^h.Sum64(), 0x5eed_c10d_6a7e+n))
	return draws{
		jitter:   rng.Float64(),
		errorP:   rng.Float64(),
		timeoutP: rng.Float64(),
		spikeP:   rng.Float64(),
	}, f
}

// take takes one token from the read or write bucket. When the bucket is
// empty it takes nothing and returns how long until a token is available.
func (s *Server) take(write bool) (ok bool, retryAfter time.Duration) {
	lim := s.readLim
	if write {
		lim = s.writeLim
	}
	if lim == nil {
		return true, 0
	}
	s.quotaMu.Lock()
	defer s.quotaMu.Unlock()
	now := time.Now()
	if lim.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - lim.TokensAt(now)
	d := time.Duration(math.Ceil(missing / float64(lim.Limit()) * float64(time.Second)))
	return false, max(d, time.Millisecond)
}

// sleep waits d or until the server closes; false when it closed.
func (s *Server) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}

// reply is a handler's answer: an HTTP status and a JSON body.
type reply struct {
	status int
	body   any
}

func ok(body any) reply { return reply{http.StatusOK, body} }

func fail(status int, code, format string, args ...any) reply {
	return reply{status, errorBody{Error: errorDetail{Code: code, Message: fmt.Sprintf(format, args...)}}}
}

// call is what a handler knows about the request beyond *http.Request.
type call struct {
	method    string
	requestID string
}

type handlerFunc func(r *http.Request, c call) reply

// routes builds the HTTP mux. See docs/simcloud.md for the API.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	h := func(pattern, method string, fn handlerFunc) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, method, fn) })
	}
	h("GET /v1/instances/{id}", MethodGetInstance, s.getInstance)
	mux.HandleFunc("GET /v1/instances", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("name") {
			s.serve(w, r, MethodGetInstanceByName, s.getInstanceByName)
			return
		}
		s.serve(w, r, MethodListInstances, s.listInstances)
	})
	h("POST /v1/instances:batchGet", MethodBatchGetInstances, s.batchGetInstances)
	h("GET /v1/loadbalancers/{name}", MethodGetLoadBalancer, s.getLoadBalancer)
	h("PUT /v1/loadbalancers/{name}", MethodEnsureLoadBalancer, s.ensureLoadBalancer)
	h("DELETE /v1/loadbalancers/{name}", MethodDeleteLoadBalancer, s.deleteLoadBalancer)
	h("GET /v1/clusters", MethodListClusters, s.listClusters)
	h("GET /v1/clusters/{cluster}/master", MethodGetMaster, s.getMaster)
	h("GET /v1/clusters/{cluster}/routes", MethodListRoutes, s.listRoutes)
	h("POST /v1/clusters/{cluster}/routes", MethodCreateRoute, s.createRoute)
	h("DELETE /v1/clusters/{cluster}/routes/{name}", MethodDeleteRoute, s.deleteRoute)
	return mux
}

// serve runs the pipeline every call goes through: count, draw, latency,
// auth, outage, throttle storm, quota, injected error, injected hang, and
// finally the handler.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, method string, fn handlerFunc) {
	if !s.enter() {
		writeReply(w, fail(http.StatusServiceUnavailable, CodeServiceUnavailable, "server is closing"))
		return
	}
	defer s.inflight.Done()

	c := call{method: method, requestID: r.Header.Get(headerRequestID)}
	if c.requestID != "" {
		w.Header().Set(headerRequestID, c.requestID)
	}
	write := isWrite(method)
	s.count(method, write, outcomeCall)

	d, f := s.draw(method + " " + r.URL.RequestURI())
	latency := s.cfg.BaseLatency + time.Duration(d.jitter*float64(s.cfg.Jitter))
	if d.spikeP < f.SpikeRate {
		latency += f.SpikeLatency
	}
	if !s.sleep(latency) {
		writeReply(w, fail(http.StatusServiceUnavailable, CodeServiceUnavailable, "server is closing"))
		return
	}

	if !s.authorized(r) {
		s.count(method, write, outcomeClientError)
		writeReply(w, fail(http.StatusUnauthorized, CodeUnauthorized, "missing or invalid bearer token"))
		return
	}
	if f.Outage {
		s.count(method, write, outcomeError)
		writeReply(w, fail(http.StatusServiceUnavailable, CodeServiceUnavailable, "service unavailable"))
		return
	}
	if f.ThrottleStorm {
		s.count(method, write, outcomeThrottled)
		ra := f.StormRetryAfter
		if ra == 0 {
			ra = DefaultStormRetryAfter
		}
		writeThrottled(w, ra, "throttle storm: rate exceeded")
		return
	}
	if ok, ra := s.take(write); !ok {
		s.count(method, write, outcomeThrottled)
		kind := "read"
		if write {
			kind = "write"
		}
		writeThrottled(w, ra, kind+" quota exceeded")
		return
	}
	if d.errorP < f.ErrorRate {
		s.count(method, write, outcomeError)
		writeReply(w, fail(http.StatusInternalServerError, CodeInternalError, "injected internal error"))
		return
	}
	if write && d.errorP < f.ErrorRate+f.AmbiguousRate {
		// Applied, then answered as a failure: half 500, half a hang.
		fn(r, c)
		s.count(method, write, outcomeAmbiguous)
		if d.timeoutP < 0.5 {
			writeReply(w, fail(http.StatusInternalServerError, CodeInternalError, "injected internal error after the write was applied"))
			return
		}
		s.hang(r.Context())
		writeReply(w, fail(http.StatusGatewayTimeout, CodeGatewayTimeout, "injected timeout after the write was applied"))
		return
	}
	if d.timeoutP < f.TimeoutRate {
		s.hang(r.Context())
		s.count(method, write, outcomeError)
		writeReply(w, fail(http.StatusGatewayTimeout, CodeGatewayTimeout, "injected timeout"))
		return
	}

	rep := fn(r, c)
	if rep.status >= 400 && rep.status < 500 {
		s.count(method, write, outcomeClientError)
	}
	writeReply(w, rep)
}

// hang blocks until the client gives up, the server closes or HangTimeout.
func (s *Server) hang(ctx context.Context) {
	t := time.NewTimer(s.cfg.HangTimeout)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-s.closing:
	case <-t.C:
	}
}

func (s *Server) authorized(r *http.Request) bool {
	token, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !found || token == "" {
		return false
	}
	if s.cfg.APIKey == "" {
		return true
	}
	return subtle.ConstantTimeCompare([]byte(token), []byte(string(s.cfg.APIKey))) == 1
}

// writeThrottled answers 429 with Retry-After (whole seconds, rounded up)
// and X-Retry-After-Ms (milliseconds, rounded up).
func writeThrottled(w http.ResponseWriter, retryAfter time.Duration, msg string) {
	ms := max(1, int64(math.Ceil(float64(retryAfter)/float64(time.Millisecond))))
	secs := max(1, int64(math.Ceil(retryAfter.Seconds())))
	w.Header().Set(headerRetryAfter, strconv.FormatInt(secs, 10))
	w.Header().Set(headerRetryAfterMs, strconv.FormatInt(ms, 10))
	writeReply(w, fail(http.StatusTooManyRequests, CodeTooManyRequests, "%s; retry after %dms", msg, ms))
}

func writeReply(w http.ResponseWriter, rep reply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	if rep.body != nil {
		_ = json.NewEncoder(w).Encode(rep.body)
	}
}

// maxBodyBytes bounds request bodies (a full batch of 253-character names
// is about 130 KiB).
const maxBodyBytes = 4 << 20

// decodeBody strictly decodes a JSON request body into v.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON body: %v", err)
	}
	if dec.More() {
		return errors.New("invalid JSON body: trailing data")
	}
	return nil
}
