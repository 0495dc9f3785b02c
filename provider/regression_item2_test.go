package provider

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/limiter"
)

// Item 2: a hung cloud (wrapped DeadlineExceeded while the caller's context
// is live) is a cloud failure.
func TestRegression_HungCloudTripsBreaker(t *testing.T) {
	up := newCountingCloud()
	up.metadataHook = func(*v1.Node) (*cloudprovider.InstanceMetadata, error) {
		return nil, fmt.Errorf("Get https://ec2/: %w", context.DeadlineExceeded)
	}
	c := mustNew(t, up, testConfig(newFakeClock()))
	for n := range 60 {
		_, _ = v2(t, c).InstanceMetadata(context.Background(), testNode(fmt.Sprint("n", n), fmt.Sprint("fake://n", n)))
	}
	if got := up.Calls("InstanceMetadata"); got >= 60 {
		t.Fatalf("upstream calls = %d for 60 reads against a hung cloud: the breaker never tripped", got)
	}
	if s := c.(*cloud).g.breakers[familyRead].State(); s != limiter.StateOpen {
		t.Fatalf("read breaker = %v, want open", s)
	}
}

// Item 2: which context errors count against the breaker.
func TestRegression_BreakerOutcomeOfContextErrors(t *testing.T) {
	g := &gate{}
	g.throttle, _ = limiter.NewThrottleClassifier(nil)
	hung := fmt.Errorf("Get https://ec2/: %w", context.DeadlineExceeded)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	timedOut, cancel2 := context.WithTimeoutCause(context.Background(), 0, errCallTimeout)
	defer cancel2()
	<-timedOut.Done()
	for _, tc := range []struct {
		name    string
		ctx     context.Context
		err     error
		counted bool
	}{
		{"client timeout, caller waiting", context.Background(), hung, true},
		{"caller gave up", ended, hung, false},
		{"cloudgate's own batch timeout", timedOut, hung, true},
		{"success", ended, nil, false},
	} {
		out := breakerOutcome(tc.ctx, tc.err)
		if counted := out != nil && !g.notACloudFailure(out); counted != tc.counted {
			t.Errorf("%s: counted as a cloud failure = %v, want %v", tc.name, counted, tc.counted)
		}
	}
}
