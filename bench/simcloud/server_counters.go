package simcloud

import (
	"maps"
	"time"
)

// Counters is an exact snapshot of the calls the server has seen since it
// started or since the last ResetCounters. Maps are keyed by API method
// (the Method* constants) and hold only methods with a non-zero count.
//
// Every request that reached an endpoint is a call, whatever its outcome:
// a throttled (429) call counts in Calls and in Throttled, an injected
// failure in Calls and in Errors. So Calls is the load the caller put on
// the API, and Calls - Throttled - Errors - ClientErrors is what it served.
type Counters struct {
	// Calls counts every call by method.
	Calls map[string]int64
	// Throttled counts calls answered 429 TooManyRequests (quota exceeded
	// or ThrottleStorm).
	Throttled map[string]int64
	// Errors counts injected failures: 500 (ErrorRate), 504 (TimeoutRate)
	// and 503 (Outage).
	Errors map[string]int64
	// Ambiguous counts writes applied and then answered 500 or 504
	// (Faults.AmbiguousRate); they are in Errors too.
	Ambiguous map[string]int64
	// ClientErrors counts other 4xx answers: bad requests, 401, 409 and
	// not-found answers (a missing instance is a 404 here).
	ClientErrors map[string]int64

	// Totals over read and write methods.
	ReadCalls, WriteCalls         int64
	ReadThrottled, WriteThrottled int64
	ReadErrors, WriteErrors       int64

	// BatchItems is the number of ids and names BatchGetInstances calls
	// answered (served calls only); BatchItems / served batch calls is the
	// mean batch size.
	BatchItems int64
	// ListedInstances is the number of instances ListInstances pages
	// returned.
	ListedInstances int64
	// HiddenAnswers counts lookups answered "not found" (or left out of a
	// list page) for a live instance by Server.HideInstanceOnce.
	HiddenAnswers int64
}

// TotalCalls is ReadCalls + WriteCalls.
func (c Counters) TotalCalls() int64 { return c.ReadCalls + c.WriteCalls }

// TotalThrottled is ReadThrottled + WriteThrottled.
func (c Counters) TotalThrottled() int64 { return c.ReadThrottled + c.WriteThrottled }

// TotalErrors is ReadErrors + WriteErrors.
func (c Counters) TotalErrors() int64 { return c.ReadErrors + c.WriteErrors }

func newCounters() Counters {
	return Counters{
		Calls:        map[string]int64{},
		Throttled:    map[string]int64{},
		Errors:       map[string]int64{},
		Ambiguous:    map[string]int64{},
		ClientErrors: map[string]int64{},
	}
}

func (c Counters) clone() Counters {
	out := c
	out.Calls = maps.Clone(c.Calls)
	out.Throttled = maps.Clone(c.Throttled)
	out.Errors = maps.Clone(c.Errors)
	out.Ambiguous = maps.Clone(c.Ambiguous)
	out.ClientErrors = maps.Clone(c.ClientErrors)
	return out
}

type outcome int

const (
	outcomeCall outcome = iota
	outcomeThrottled
	outcomeError
	outcomeClientError
	outcomeAmbiguous
)

func (s *Server) count(method string, write bool, o outcome) {
	s.cntMu.Lock()
	defer s.cntMu.Unlock()
	c := &s.counters
	switch o {
	case outcomeCall:
		c.Calls[method]++
		if write {
			c.WriteCalls++
		} else {
			c.ReadCalls++
		}
	case outcomeThrottled:
		c.Throttled[method]++
		if write {
			c.WriteThrottled++
		} else {
			c.ReadThrottled++
		}
	case outcomeError:
		c.Errors[method]++
		if write {
			c.WriteErrors++
		} else {
			c.ReadErrors++
		}
	case outcomeClientError:
		c.ClientErrors[method]++
	case outcomeAmbiguous:
		c.Ambiguous[method]++
		c.Errors[method]++
		if write {
			c.WriteErrors++
		} else {
			c.ReadErrors++
		}
	}
}

func (s *Server) addItems(batch, listed int64) {
	s.cntMu.Lock()
	s.counters.BatchItems += batch
	s.counters.ListedInstances += listed
	s.cntMu.Unlock()
}

func (s *Server) addHidden() {
	s.cntMu.Lock()
	s.counters.HiddenAnswers++
	s.cntMu.Unlock()
}

// Counters returns a snapshot of the call counters.
func (s *Server) Counters() Counters {
	s.cntMu.Lock()
	defer s.cntMu.Unlock()
	return s.counters.clone()
}

// ResetCounters sets every counter to zero. It does not touch the quota
// buckets, the write log or any data.
func (s *Server) ResetCounters() {
	s.cntMu.Lock()
	s.counters = newCounters()
	s.cntMu.Unlock()
}

// WriteRecord is one write that landed: the server accepted it and changed
// or confirmed state. Rejected writes (429, injected 5xx, outage, 4xx) are
// never recorded.
type WriteRecord struct {
	// Seq numbers records from 1 in the order the writes took effect; it
	// keeps counting across ResetWriteLog.
	Seq int64
	// Time is when the write took effect (server clock).
	Time time.Time
	// Method is MethodEnsureLoadBalancer, MethodDeleteLoadBalancer,
	// MethodCreateRoute or MethodDeleteRoute.
	Method string
	// Target is the load balancer's name, or "cluster/route-name".
	Target string
	// RequestID is the caller's X-Request-Id header ("" if not sent).
	RequestID string
	// Changed is false when the write only confirmed state: an ensure that
	// matched the existing load balancer, a create of an identical route,
	// or a delete of something already absent.
	Changed bool
}

// WriteLog returns a copy of the write log, in Seq order.
func (s *Server) WriteLog() []WriteRecord {
	s.data.mu.Lock()
	defer s.data.mu.Unlock()
	return append([]WriteRecord(nil), s.data.log...)
}

// ResetWriteLog empties the write log; Seq keeps counting.
func (s *Server) ResetWriteLog() {
	s.data.mu.Lock()
	s.data.log = nil
	s.data.mu.Unlock()
}
