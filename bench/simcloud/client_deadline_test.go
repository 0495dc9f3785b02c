package simcloud

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"testing/synctest"
	"time"
)

// waitThen is a WrapTransport that waits before sending, as a client-side
// token bucket does.
type waitThen struct {
	wait time.Duration
	next http.RoundTripper
}

func (w waitThen) RoundTrip(req *http.Request) (*http.Response, error) {
	time.Sleep(w.wait)
	return w.next.RoundTrip(req)
}

// hang never answers: it returns when the request's context ends.
type hang struct{}

func (hang) RoundTrip(req *http.Request) (*http.Response, error) {
	<-req.Context().Done()
	return nil, req.Context().Err()
}

// TestTimeoutCountsFromSend checks that ClientConfig.Timeout starts when the
// request is sent, after a wait in WrapTransport, and still bounds a request
// the server never answers. It runs on synctest's virtual clock, so the
// server is in memory: a goroutine blocked on a socket would stall the clock.
func TestTimeoutCountsFromSend(t *testing.T) {
	const timeout = 10 * time.Second
	synctest.Test(t, func(t *testing.T) {
		s := startServer(t, ServerConfig{InMemory: true})
		insts := addInstances(t, s, 1, "node")
		node := nodeByProviderID(insts[0].NodeName, insts[0].ProviderID())
		// A wait of three timeouts before the send: the call still succeeds.
		c, err := NewClient(ClientConfig{
			Endpoint: s.URL(), APIKey: "k", Timeout: timeout, Transport: s.Transport(),
			WrapTransport: func(next http.RoundTripper) http.RoundTripper { return waitThen{3 * timeout, next} },
		})
		if err != nil {
			t.Fatal(err)
		}
		v2, _ := c.InstancesV2()
		start := time.Now()
		if ok, err := v2.InstanceExists(context.Background(), node); err != nil || !ok {
			t.Fatalf("InstanceExists after a %v wait before the send = %v, %v; want true, nil", 3*timeout, ok, err)
		}
		if got := time.Since(start); got != 3*timeout {
			t.Fatalf("call took %v, want the %v wait", got, 3*timeout)
		}

		// The same wait, then a server that never answers: the call ends
		// Timeout after the send.
		c, err = NewClient(ClientConfig{
			Endpoint: s.URL(), APIKey: "k", Timeout: timeout, Transport: hang{},
			WrapTransport: func(next http.RoundTripper) http.RoundTripper { return waitThen{3 * timeout, next} },
		})
		if err != nil {
			t.Fatal(err)
		}
		v2, _ = c.InstancesV2()
		start = time.Now()
		_, err = v2.InstanceExists(context.Background(), node)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("InstanceExists against a hung server = %v, want context.DeadlineExceeded", err)
		}
		if got := time.Since(start); got != 4*timeout {
			t.Fatalf("hung call took %v, want wait + timeout = %v", got, 4*timeout)
		}
	})
}
