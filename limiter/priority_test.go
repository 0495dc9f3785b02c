package limiter

import (
	"context"
	"testing"
	"time"
)

func TestPriorityString(t *testing.T) {
	for p, want := range map[Priority]string{
		PriorityCritical: "critical", PriorityNormal: "normal", PriorityBackground: "background", 7: "Priority(7)",
	} {
		if got := p.String(); got != want {
			t.Errorf("Priority(%d).String() = %q, want %q", int(p), got, want)
		}
	}
}

func TestBucketPriorityOrder(t *testing.T) {
	const (
		C = PriorityCritical
		N = PriorityNormal
		B = PriorityBackground
	)
	tests := []struct {
		name    string
		arrival []Priority
		want    []int // indexes into arrival, in release order
	}{
		{"critical overtakes background", []Priority{B, B, B, C}, []int{3, 0, 1, 2}},
		{"FIFO within a priority", []Priority{N, N, N}, []int{0, 1, 2}},
		{"mixed", []Priority{B, N, B, C, N, C}, []int{3, 5, 1, 4, 0, 2}},
		{"out of range clamps", []Priority{Priority(9), Priority(-3), N}, []int{1, 2, 0}},
		// A write arriving behind a queue of reads goes out with the next token.
		{"write not starved by queued reads", []Priority{N, N, B, B, N, C}, []int{5, 0, 1, 4, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1}, nil)
			drain(t, b)
			chans := make([]<-chan error, len(tt.arrival))
			for i, p := range tt.arrival {
				chans[i] = queue(t, context.Background(), b, p)
			}
			for step, want := range tt.want {
				clk.Step(time.Second)
				if err := result(t, chans[want]); err != nil {
					t.Fatalf("step %d: waiter %d: %v", step, want, err)
				}
				// Exactly one waiter is released per token.
				eventually(t, "one fewer waiter", func() bool { return b.Waiting() == len(tt.want)-step-1 })
				for i, ch := range chans {
					select {
					case err := <-ch:
						t.Fatalf("step %d: waiter %d released out of order (err %v)", step, i, err)
					default:
					}
				}
			}
		})
	}
}

func TestBucketPriorityWithTokensAvailable(t *testing.T) {
	// A waiter that arrives while others are queued queues too, even if a
	// token has accrued, so it cannot overtake a higher-priority waiter.
	b, clk := newTestBucket(t, BucketConfig{QPS: 1, Burst: 1}, nil)
	drain(t, b)
	crit := queue(t, context.Background(), b, PriorityCritical)
	clk.Step(time.Second)
	if err := result(t, crit); err != nil {
		t.Fatal(err)
	}
	bg := queue(t, context.Background(), b, PriorityBackground)
	clk.Step(time.Second)
	if err := result(t, bg); err != nil {
		t.Fatal(err)
	}
}
