package limiter

import (
	"slices"
	"testing"
)

func TestWaitQueueOrder(t *testing.T) {
	const (
		C = PriorityCritical
		N = PriorityNormal
		B = PriorityBackground
	)
	tests := []struct {
		name    string
		push    []Priority
		remove  []int // indexes into push, removed before draining
		want    []int // indexes into push, in service order
		wantLen int
	}{
		{"empty", nil, nil, nil, 0},
		{"FIFO", []Priority{N, N, N}, nil, []int{0, 1, 2}, 3},
		{"priority first", []Priority{B, N, C, B, C}, nil, []int{2, 4, 1, 0, 3}, 5},
		{"remove head, middle, tail", []Priority{N, N, N, N, N}, []int{0, 2, 4}, []int{1, 3}, 2},
		{"remove only one of a priority", []Priority{B, C, N}, []int{1}, []int{2, 0}, 2},
		{"clamped priorities", []Priority{Priority(7), Priority(-1), N}, nil, []int{1, 2, 0}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q waitQueue
			ws := make([]*waiter, len(tt.push))
			for i, p := range tt.push {
				ws[i] = newWaiter(p)
				q.push(ws[i])
			}
			for _, i := range tt.remove {
				q.remove(ws[i])
			}
			if q.len() != tt.wantLen {
				t.Fatalf("len() = %d, want %d", q.len(), tt.wantLen)
			}
			var got []int
			for w := q.head(); w != nil; w = q.head() {
				got = append(got, slices.Index(ws, w))
				q.remove(w)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("service order %v, want %v", got, tt.want)
			}
			if q.len() != 0 || q.head() != nil {
				t.Fatalf("after draining: len() %d, head() %v", q.len(), q.head())
			}
		})
	}
}

func TestWaitQueueReuseAfterRemove(t *testing.T) {
	var q waitQueue
	a, b := newWaiter(PriorityNormal), newWaiter(PriorityNormal)
	q.push(a)
	q.remove(a)
	q.push(b)
	q.push(a) // a removed waiter can be queued again, behind b
	if q.head() != b {
		t.Fatal("head is not b")
	}
	q.remove(b)
	if q.head() != a || q.len() != 1 {
		t.Fatalf("head %p len %d, want a and 1", q.head(), q.len())
	}
}
