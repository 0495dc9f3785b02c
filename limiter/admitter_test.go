package limiter

import (
	"context"
	"errors"
	"testing"
	"time"
)

type fakeAdmitter struct {
	err       error
	waits     int
	throttles []time.Duration
}

func (f *fakeAdmitter) Wait(context.Context, Priority) error { f.waits++; return f.err }
func (f *fakeAdmitter) OnThrottled(d time.Duration)          { f.throttles = append(f.throttles, d) }

func TestChain(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name      string
		errs      []error
		wantErr   error
		wantWaits []int
	}{
		{"all admit", []error{nil, nil}, nil, []int{1, 1}},
		{"first refuses: second not asked", []error{boom, nil}, boom, []int{1, 0}},
		{"second refuses", []error{nil, boom}, boom, []int{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Chain
			var fs []*fakeAdmitter
			for _, e := range tt.errs {
				f := &fakeAdmitter{err: e}
				fs = append(fs, f)
				c = append(c, f)
			}
			if err := c.Wait(context.Background(), PriorityNormal); err != tt.wantErr {
				t.Errorf("Wait = %v, want %v", err, tt.wantErr)
			}
			for i, f := range fs {
				if f.waits != tt.wantWaits[i] {
					t.Errorf("admitter %d asked %d times, want %d", i, f.waits, tt.wantWaits[i])
				}
			}
			c.OnThrottled(time.Second)
			for i, f := range fs {
				if len(f.throttles) != 1 || f.throttles[0] != time.Second {
					t.Errorf("admitter %d throttles %v", i, f.throttles)
				}
			}
		})
	}
}

// A real bucket in a chain: the chain waits on it.
func TestChainWithBucket(t *testing.T) {
	b, err := NewBucket("m", BucketConfig{QPS: 1, Burst: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := Chain{b, &fakeAdmitter{}}
	if err := c.Wait(context.Background(), PriorityCritical); err != nil {
		t.Fatal(err)
	}
	if got := b.Tokens(); got >= 1 {
		t.Errorf("bucket tokens %v after a chained Wait, want the token taken", got)
	}
}
