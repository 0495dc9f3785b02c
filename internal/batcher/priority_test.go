package batcher

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// urgentRig is a SendAtOnce batcher with an Admitter, its requests added
// with keyOf and prioOf ("!x" is x, more urgent) whose Admit waits for a token the test gives, or for its
// context; it records every Admit call and how it ended.
type urgentRig struct {
	b      *Batcher[string, string]
	rec    *recorder
	tokens chan struct{}
	mu     sync.Mutex
	admits []string // each Admit call: its batch, and "preempted" or "admitted"
}

func newUrgentRig(t *testing.T, maxItems int) *urgentRig {
	return newUrgentRigOpts(t, Options{Name: "urgent", MaxItems: maxItems, MaxTimeout: time.Hour, SendAtOnce: true})
}

func newUrgentRigOpts(t *testing.T, opts Options) *urgentRig {
	t.Helper()
	r := &urgentRig{rec: &recorder{}, tokens: make(chan struct{}, 10)}
	b, err := New(opts, Executor[string, string](admitFuncs{
		admit: func(ctx context.Context, _ int, pending []string) (bool, error) {
			outcome := "admitted"
			var err error
			select {
			case <-r.tokens:
			case <-ctx.Done():
				outcome, err = "preempted", context.Cause(ctx)
			}
			r.mu.Lock()
			r.admits = append(r.admits, fmt.Sprint(pending, " ", outcome))
			r.mu.Unlock()
			return err == nil, err
		},
		sendFunc: func(ctx context.Context, items []string, f Flush, answer func(int, string)) []string {
			out := r.rec.Send(ctx, items, f, answer)
			if f.Err != nil { // as an Executor must: nothing was admitted
				for i := range out {
					out[i] = "error " + f.Err.Error()
				}
			}
			return out
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	r.b = b
	return r
}

func (r *urgentRig) check(t *testing.T, admits []string, batches [][]string) {
	t.Helper()
	r.mu.Lock()
	got := fmt.Sprint(r.admits)
	r.mu.Unlock()
	if got != fmt.Sprint(admits) {
		t.Errorf("Admit calls %s, want %v", got, admits)
	}
	if bs, _ := r.rec.snapshot(); fmt.Sprint(bs) != fmt.Sprint(batches) {
		t.Errorf("batches %v, want %v", bs, batches)
	}
}

// A more urgent request joining the batch Admit waits for preempts that
// wait: Admit is called again, for the batch as it is now.
func TestPriorityJoinPreemptsAdmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newUrgentRig(t, 100)
		a := add(r.b, context.Background(), "a")
		synctest.Wait()
		c := add(r.b, context.Background(), "c") // as urgent: no preemption
		synctest.Wait()
		x := add(r.b, context.Background(), "!x")
		synctest.Wait()
		r.tokens <- struct{}{}
		wait(t, a, c, x)
		r.b.Wait()
		r.check(t, []string{"[a] preempted", "[a c !x] admitted"}, [][]string{{"a", "c", "!x"}})
	})
}

// The same through a join: a request of the same key, more urgent, makes
// the batch more urgent; its slot keeps the first request.
func TestPriorityJoinSameKeyPreemptsAdmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newUrgentRig(t, 100)
		var answers [2]string
		var wg sync.WaitGroup
		for i, in := range []string{"a", "!a"} {
			wg.Go(func() { answers[i], _ = r.b.Add(context.Background(), keyOf(in), prioOf(in), in) })
			synctest.Wait()
		}
		r.tokens <- struct{}{}
		wg.Wait()
		r.b.Wait()
		if answers != [2]string{"answer a", "answer a"} {
			t.Errorf("answers %q, want the slot's request's", answers)
		}
		r.check(t, []string{"[a] preempted", "[a] admitted"}, [][]string{{"a"}})
	})
}

// The most urgent due batch is admitted first: an urgent request behind a
// full batch of less urgent ones goes ahead of it, taking over its wait;
// the full batch is admitted after.
func TestPriorityUrgentBatchAdmittedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newUrgentRig(t, 2)
		a := add(r.b, context.Background(), "a")
		synctest.Wait()
		b := add(r.b, context.Background(), "b") // a, b: full, waiting for Admit
		synctest.Wait()
		x := add(r.b, context.Background(), "!x")
		synctest.Wait()
		r.tokens <- struct{}{}
		wait(t, x)
		synctest.Wait()
		if a2, b2 := len(a), len(b); a2+b2 != 0 {
			t.Fatal("the full batch was sent with the urgent batch's admission")
		}
		r.tokens <- struct{}{}
		wait(t, a, b)
		r.b.Wait()
		r.check(t, []string{"[a] preempted", "[!x] admitted", "[a b] admitted"}, [][]string{{"!x"}, {"a", "b"}})
	})
}

// Among equal priorities nothing is preempted: the full batch is
// admitted first, as before.
func TestNoPriorityOldestFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newUrgentRig(t, 2)
		a := addPrio(r.b, context.Background(), "a", 0)
		synctest.Wait()
		b := addPrio(r.b, context.Background(), "b", 0)
		synctest.Wait()
		x := addPrio(r.b, context.Background(), "!x", 0)
		synctest.Wait()
		r.tokens <- struct{}{}
		r.tokens <- struct{}{}
		wait(t, a, b, x)
		r.b.Wait()
		r.check(t, []string{"[a] admitted", "[!x] admitted"}, [][]string{{"a", "b"}, {"!x"}})
	})
}

// A batch's AdmitTimeout bounds its whole wait for admission: more urgent
// batches arriving less than AdmitTimeout apart take over its Admit again
// and again, and it still ends AdmitTimeout after it was first due, with
// ErrAdmitTimeout, whether Admit runs for it then or not.
func TestAdmitTimeoutSpansPreemptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		// urgent: a more urgent batch arrives every this often and is
		// admitted 20 s later (0: none).
		urgent time.Duration
	}{
		{name: "alone"},
		{name: "preempted every 50s", urgent: 50 * time.Second},
		{name: "preempted every 10s", urgent: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const bound = 2 * time.Minute
				r := newUrgentRigOpts(t, Options{Name: "bound", MaxItems: 1, MaxTimeout: time.Hour, SendAtOnce: true, AdmitTimeout: bound})
				start := time.Now()
				var took time.Duration
				var out string
				done := make(chan struct{})
				go func() {
					defer close(done)
					out, _ = r.b.Add(context.Background(), "a", 1, "a")
					took = time.Since(start)
				}()
				synctest.Wait()
				for i := 0; tc.urgent > 0; i++ {
					select {
					case <-done:
					case <-time.After(tc.urgent):
						x := fmt.Sprintf("!x%d", i)
						go r.b.Add(context.Background(), keyOf(x), prioOf(x), x)
						go func() { time.Sleep(20 * time.Second); r.tokens <- struct{}{} }()
						continue
					}
					break
				}
				<-done
				if took != bound || out != "error "+ErrAdmitTimeout.Error() {
					t.Errorf("the background request ended after %s with %q; want %s and ErrAdmitTimeout", took, out, bound)
				}
				time.Sleep(time.Minute) // the urgent batches in flight are admitted
				r.b.Wait()
			})
		})
	}
}

// A batch whose AdmitTimeout runs out while Admit runs for it ends with
// Admit's answer to the cancellation, at its deadline.
func TestAdmitTimeoutDuringAdmit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newUrgentRigOpts(t, Options{Name: "bound", MaxItems: 1, MaxTimeout: time.Hour, SendAtOnce: true, AdmitTimeout: time.Minute})
		a := add(r.b, context.Background(), "a")
		time.Sleep(time.Minute) // a's Admit is cancelled at its deadline
		synctest.Wait()
		if err := <-a; err == nil || err.Error() != `a got "error `+ErrAdmitTimeout.Error()+`"` {
			t.Fatalf("a: %v, want the ErrAdmitTimeout answer", err)
		}
		r.check(t, []string{"[a] preempted"}, [][]string{{"a"}})
	})
}
