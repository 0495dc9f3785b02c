package batcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an Executor answering each item with its own text and
// recording the batches it got.
type recorder struct {
	mu      sync.Mutex
	batches [][]string
	reasons []string
}

func (r *recorder) Send(_ context.Context, items []string, f Flush, _ func(int, string)) []string {
	r.mu.Lock()
	r.batches = append(r.batches, append([]string(nil), items...))
	r.reasons = append(r.reasons, f.Reason)
	r.mu.Unlock()
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = "answer " + it
	}
	return out
}

func (r *recorder) snapshot() ([][]string, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.batches...), append([]string(nil), r.reasons...)
}

// sendFunc is an Executor of a function.
type sendFunc func(ctx context.Context, items []string, f Flush, answer func(int, string)) []string

func (s sendFunc) Send(ctx context.Context, items []string, f Flush, answer func(int, string)) []string {
	return s(ctx, items, f, answer)
}

// admitFuncs is an Admitter of two functions.
type admitFuncs struct {
	sendFunc
	admit func(ctx context.Context, prio int, pending []string) (bool, error)
}

func (a admitFuncs) Admit(ctx context.Context, prio int, pending []string) (bool, error) {
	return a.admit(ctx, prio, pending)
}

// keyOf and prioOf are the tests' keys and priorities: "!x" is x, more
// urgent.
func keyOf(in string) string { return strings.TrimPrefix(in, "!") }

func prioOf(in string) int {
	if strings.HasPrefix(in, "!") {
		return 0
	}
	return 1
}

func newTest(t *testing.T, o Options) (*Batcher[string, string], *clocktesting.FakeClock, *recorder) {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := &recorder{}
	o.Clock = clk
	b, err := New(o, Executor[string, string](rec))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Wait)
	return b, clk, rec
}

// waitFor polls cond (bounded; no timing assertion).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 5000 {
		if cond() {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// add adds in at its priority (prioOf), addPrio at prio.
func add(b *Batcher[string, string], ctx context.Context, in string) chan error {
	return addPrio(b, ctx, in, prioOf(in))
}

func addPrio(b *Batcher[string, string], ctx context.Context, in string, prio int) chan error {
	ch := make(chan error, 1)
	go func() {
		out, err := b.Add(ctx, keyOf(in), prio, in)
		if err == nil && out != "answer "+in {
			err = fmt.Errorf("%s got %q", in, out)
		}
		ch <- err
	}()
	return ch
}

func TestNeverAboveMaxItems(t *testing.T) {
	b, _, rec := newTest(t, Options{Name: "t", MaxItems: 4, MaxTimeout: time.Hour})
	var chs []chan error
	for i := range 12 {
		chs = append(chs, add(b, context.Background(), fmt.Sprint("r", i)))
	}
	for _, ch := range chs {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	batches, reasons := rec.snapshot()
	if len(batches) != 3 {
		t.Fatalf("%d batches, want 3 full ones: %v", len(batches), batches)
	}
	for i, bt := range batches {
		if len(bt) != 4 || reasons[i] != FlushFull {
			t.Fatalf("batch %d: %v (%s), want 4 items sent full", i, bt, reasons[i])
		}
	}
}

func TestMaxTimeoutSendsWhatJoined(t *testing.T) {
	b, clk, rec := newTest(t, Options{Name: "t", MaxItems: 100, MaxTimeout: 100 * time.Millisecond})
	a, c := add(b, context.Background(), "a"), add(b, context.Background(), "b")
	waitFor(t, "two requests", func() bool { return b.Pending() == 2 && clk.HasWaiters() })
	clk.Step(99 * time.Millisecond)
	if b.Pending() != 2 {
		t.Fatal("sent before MaxTimeout")
	}
	clk.Step(time.Millisecond)
	for _, ch := range []chan error{a, c} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if batches, reasons := rec.snapshot(); len(batches) != 1 || reasons[0] != FlushTimeout {
		t.Fatalf("batches %v %v, want one sent at MaxTimeout", batches, reasons)
	}
}

func TestIdleTimeoutRestartsOnEachRequest(t *testing.T) {
	b, clk, rec := newTest(t, Options{Name: "t", MaxItems: 100, MaxTimeout: time.Hour, IdleTimeout: 10 * time.Millisecond})
	a := add(b, context.Background(), "a")
	waitFor(t, "a", func() bool { return b.Pending() == 1 && clk.HasWaiters() })
	clk.Step(6 * time.Millisecond)
	c := add(b, context.Background(), "b")
	waitFor(t, "b", func() bool { return b.Pending() == 2 })
	clk.Step(4 * time.Millisecond) // 10ms after a, 4ms after b: not idle yet
	waitFor(t, "the idle timer re-armed", func() bool { return clk.Waiters() == 2 })
	if b.Pending() != 2 {
		t.Fatal("sent before IdleTimeout passed since the last request")
	}
	clk.Step(6 * time.Millisecond)
	for _, ch := range []chan error{a, c} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if batches, reasons := rec.snapshot(); len(batches) != 1 || reasons[0] != FlushIdle {
		t.Fatalf("batches %v %v, want one sent idle", batches, reasons)
	}
}

func TestCancelledCallerLeavesTheBatch(t *testing.T) {
	b, clk, rec := newTest(t, Options{Name: "t", MaxItems: 100, MaxTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	gone := add(b, ctx, "gone")
	stays := add(b, context.Background(), "stays")
	waitFor(t, "two requests", func() bool { return b.Pending() == 2 })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller got %v", err)
	}
	clk.Step(time.Second)
	if err := <-stays; err != nil {
		t.Fatal(err)
	}
	if batches, _ := rec.snapshot(); len(batches) != 1 || len(batches[0]) != 2 {
		t.Fatalf("batches %v, want the batch sent with both", batches)
	}
}

func TestSameRequestSharesASlot(t *testing.T) {
	b, clk, rec := newTest(t, Options{Name: "t", MaxItems: 2, MaxTimeout: time.Second})
	x1, x2 := add(b, context.Background(), "x"), add(b, context.Background(), "x")
	waitFor(t, "x twice", func() bool { return b.Pending() == 1 })
	time.Sleep(5 * time.Millisecond) // let the second join (it may not have)
	clk.Step(time.Second)
	for _, ch := range []chan error{x1, x2} {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	for _, bt := range func() [][]string { b, _ := rec.snapshot(); return b }() {
		if len(bt) != 1 {
			t.Fatalf("batch %v: the same request took two slots", bt)
		}
	}
}

// TestStepWhileAdding: the fake clock's Step runs timer callbacks under
// its own lock while requests join; it must never deadlock.
func TestStepWhileAdding(t *testing.T) {
	b, clk, _ := newTest(t, Options{Name: "t", MaxItems: 3, MaxTimeout: time.Millisecond, IdleTimeout: time.Millisecond})
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if _, err := b.Add(context.Background(), fmt.Sprint(i), 0, fmt.Sprint(i)); err != nil {
				t.Error(err)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			return
		default:
			clk.Step(time.Millisecond)
			time.Sleep(100 * time.Microsecond)
		}
	}
}

func TestNewValidates(t *testing.T) {
	exec := sendFunc(func(context.Context, []string, Flush, func(int, string)) []string { return nil })
	for _, tc := range []struct {
		o    Options
		exec Executor[string, string]
		want string
	}{
		{Options{MaxTimeout: 1}, exec, "MaxItems"},
		{Options{MaxItems: 1}, exec, "MaxTimeout"},
		{Options{MaxItems: 1, MaxTimeout: 1, IdleTimeout: -1}, exec, "IdleTimeout"},
		{Options{MaxItems: 1, MaxTimeout: 1}, nil, "Executor"},
	} {
		if _, err := New(tc.o, tc.exec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tc.o, err, tc.want)
		}
	}
}

// TestEarlyAnswer: an item the executor answers early returns at once, while
// the executor still works on the others; those get the returned answers.
func TestEarlyAnswer(t *testing.T) {
	release := make(chan struct{})
	b, err := New(Options{Name: "early", MaxItems: 2, MaxTimeout: time.Hour},
		Executor[string, string](sendFunc(func(_ context.Context, items []string, _ Flush, answer func(int, string)) []string {
			answer(0, "early "+items[0])
			<-release
			return []string{"late " + items[0], "late " + items[1]}
		})))
	if err != nil {
		t.Fatal(err)
	}
	first, second := make(chan string, 1), make(chan string, 1)
	go func() { out, _ := b.Add(context.Background(), "a", 0, "a"); first <- out }()
	for deadline := time.Now().Add(10 * time.Second); b.Pending() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first item never joined the batch")
		}
	}
	go func() { out, _ := b.Add(context.Background(), "b", 0, "b"); second <- out }()
	if got := <-first; got != "early a" {
		t.Fatalf("first = %q, want the early answer", got)
	}
	select {
	case got := <-second:
		t.Fatalf("second answered %q before the executor returned", got)
	default:
	}
	close(release)
	if got := <-second; got != "late b" {
		t.Fatalf("second = %q, want %q", got, "late b")
	}
	b.Wait()
}

// TestSendAtOnce: a lone request is sent at once (no clock step at all);
// requests arriving while a batch is being sent accumulate and go together
// when it returns; MaxTimeout still caps their wait.
func TestSendAtOnce(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	rec := &recorder{}
	release := make(chan struct{}, 10)
	b, err := New(Options{Name: "t", MaxItems: 100, MaxTimeout: 100 * time.Millisecond, SendAtOnce: true, Clock: clk},
		Executor[string, string](sendFunc(func(ctx context.Context, items []string, f Flush, answer func(int, string)) []string {
			out := rec.Send(ctx, items, f, answer)
			<-release
			return out
		})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Wait)
	sent := func(n int) func() bool {
		return func() bool { bs, _ := rec.snapshot(); return len(bs) == n }
	}
	a := add(b, context.Background(), "a")
	waitFor(t, "a sent at once, without any clock step", sent(1))
	var more []chan error
	for _, in := range []string{"b", "c", "d"} {
		more = append(more, add(b, context.Background(), in))
	}
	waitFor(t, "b, c, d waiting while a is in flight", func() bool { return b.Pending() == 3 })
	if bs, _ := rec.snapshot(); len(bs) != 1 {
		t.Fatalf("sent %v while a batch was in flight", bs)
	}
	release <- struct{}{} // a returns: b, c, d go together
	if err := <-a; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b, c, d sent when a returned", sent(2))
	e := add(b, context.Background(), "e") // b, c, d still in flight
	waitFor(t, "e waiting", func() bool { return b.Pending() == 1 && clk.HasWaiters() })
	clk.Step(100 * time.Millisecond) // the cap: sent although a batch is in flight
	waitFor(t, "e sent at MaxTimeout", sent(3))
	release <- struct{}{}
	release <- struct{}{}
	for _, ch := range append(more, e) {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	batches, reasons := rec.snapshot()
	want := []string{FlushNow, FlushReturned, FlushTimeout}
	if fmt.Sprint(reasons) != fmt.Sprint(want) || len(batches[1]) != 3 {
		t.Fatalf("batches %v reasons %v, want [a] [b c d] [e] sent %v", batches, reasons, want)
	}
}

// TestJoinSharesSlot: a request joining the slot of one with its key
// shares it: the slot keeps the first request, and both callers get its
// answer.
func TestJoinSharesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, clk, rec := newTest(t, Options{Name: "t", MaxItems: 2, MaxTimeout: time.Second})
		out := make(chan string, 2)
		for _, in := range []string{"x1", "x9"} {
			go func() {
				o, err := b.Add(context.Background(), "x", 1, in)
				if err != nil {
					o = err.Error()
				}
				out <- o
			}()
			synctest.Wait() // in is in the open batch
		}
		if n := b.Pending(); n != 1 {
			t.Fatalf("%d requests pending, want 1 slot for both", n)
		}
		clk.Step(time.Second)
		for range 2 {
			if o := <-out; o != "answer x1" {
				t.Errorf("a caller got %q; want the first request's answer", o)
			}
		}
		if bs, _ := rec.snapshot(); len(bs) != 1 || !slices.Equal(bs[0], []string{"x1"}) {
			t.Errorf("batches %v; want [[x1]]", bs)
		}
	})
}

// admitRig is a SendAtOnce batcher whose Admit takes a token from tokens
// (a bucket the test fills) and whose executor holds each batch until the
// test releases it.
type admitRig struct {
	b       *Batcher[string, string]
	clk     *clocktesting.FakeClock
	rec     *recorder
	tokens  chan struct{}
	release chan struct{}
	mu      sync.Mutex
	flushes []Flush
	admits  int // Admit calls
}

func newAdmitRig(t *testing.T, maxItems int) *admitRig {
	t.Helper()
	r := &admitRig{
		clk: clocktesting.NewFakeClock(time.Unix(1000, 0)), rec: &recorder{},
		tokens: make(chan struct{}, 100), release: make(chan struct{}, 100),
	}
	b, err := New(Options{Name: "admit", MaxItems: maxItems, MaxTimeout: 100 * time.Millisecond, SendAtOnce: true, Clock: r.clk}, Executor[string, string](admitFuncs{
		admit: func(_ context.Context, _ int, pending []string) (bool, error) {
			r.mu.Lock()
			r.admits++
			r.mu.Unlock()
			if _, ok := <-r.tokens; !ok {
				return false, errors.New("bucket closed")
			}
			return true, nil
		},
		sendFunc: func(ctx context.Context, items []string, f Flush, answer func(int, string)) []string {
			r.mu.Lock()
			r.flushes = append(r.flushes, f)
			r.mu.Unlock()
			out := r.rec.Send(ctx, items, f, answer)
			<-r.release
			return out
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	r.b = b
	t.Cleanup(func() {
		close(r.release) // every batch still held returns
		b.Wait()
	})
	return r
}

func (r *admitRig) sent(n int) func() bool {
	return func() bool { bs, _ := r.rec.snapshot(); return len(bs) == n }
}

func (r *admitRig) admitCalls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.admits
}

func (r *admitRig) check(t *testing.T, want [][]string, reasons []string) {
	t.Helper()
	batches, got := r.rec.snapshot()
	for _, bt := range batches {
		slices.Sort(bt) // concurrent callers join in any order
	}
	if fmt.Sprint(batches) != fmt.Sprint(want) || fmt.Sprint(got) != fmt.Sprint(reasons) {
		t.Fatalf("batches %v reasons %v, want %v %v", batches, got, want, reasons)
	}
}

func wait(t *testing.T, chs ...chan error) {
	t.Helper()
	for _, ch := range chs {
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdmitLoneAtOnce: a lone request with a token available is sent at
// once, without any clock step, admitted (its token is taken).
func TestAdmitLoneAtOnce(t *testing.T) {
	r := newAdmitRig(t, 100)
	r.tokens <- struct{}{}
	r.release <- struct{}{}
	wait(t, add(r.b, context.Background(), "a"))
	r.check(t, [][]string{{"a"}}, []string{FlushNow})
	if f := r.flushes[0]; !f.Admitted || f.Err != nil {
		t.Fatalf("flush %+v, want admitted without error", f)
	}
}

// TestAdmitTokenEmptyAccumulates: while Admit waits for a token, requests
// join the open batch, and all go with the one token when it arrives.
func TestAdmitTokenEmptyAccumulates(t *testing.T) {
	r := newAdmitRig(t, 100)
	chs := []chan error{add(r.b, context.Background(), "a")}
	waitFor(t, "a waiting for a token", func() bool { return r.admitCalls() == 1 })
	for _, in := range []string{"b", "c", "d"} {
		chs = append(chs, add(r.b, context.Background(), in))
	}
	waitFor(t, "b, c, d joining a's batch", func() bool { return r.b.Pending() == 4 })
	if bs, _ := r.rec.snapshot(); len(bs) != 0 {
		t.Fatalf("sent %v without a token", bs)
	}
	r.release <- struct{}{}
	r.tokens <- struct{}{}
	wait(t, chs...)
	r.check(t, [][]string{{"a", "b", "c", "d"}}, []string{FlushNow})
	if n := r.admitCalls(); n != 1 {
		t.Fatalf("%d Admit calls, want 1 (one token for the four)", n)
	}
}

// TestAdmitInFlightAccumulates: requests arriving while a batch is in
// flight are not admitted until it returns, then go together.
func TestAdmitInFlightAccumulates(t *testing.T) {
	r := newAdmitRig(t, 100)
	r.tokens <- struct{}{}
	r.tokens <- struct{}{}
	a := add(r.b, context.Background(), "a")
	waitFor(t, "a sent", r.sent(1))
	var more []chan error
	for _, in := range []string{"b", "c", "d"} {
		more = append(more, add(r.b, context.Background(), in))
	}
	waitFor(t, "b, c, d waiting while a is in flight", func() bool { return r.b.Pending() == 3 })
	if n := r.admitCalls(); n != 1 {
		t.Fatalf("%d Admit calls while a batch is in flight, want 1 (a's)", n)
	}
	r.release <- struct{}{} // a returns: b, c, d go together
	r.release <- struct{}{}
	wait(t, append(more, a)...)
	r.check(t, [][]string{{"a"}, {"b", "c", "d"}}, []string{FlushNow, FlushReturned})
}

// TestAdmitMaxWaitCaps: MaxTimeout still caps a request's wait behind a
// batch in flight: it is closed, admitted and sent while the other is out.
func TestAdmitMaxWaitCaps(t *testing.T) {
	r := newAdmitRig(t, 100)
	r.tokens <- struct{}{}
	r.tokens <- struct{}{}
	a := add(r.b, context.Background(), "a")
	waitFor(t, "a sent", r.sent(1))
	e := add(r.b, context.Background(), "e")
	waitFor(t, "e waiting with its timer", func() bool { return r.b.Pending() == 1 && r.clk.HasWaiters() })
	r.clk.Step(99 * time.Millisecond)
	if bs, _ := r.rec.snapshot(); len(bs) != 1 {
		t.Fatalf("sent %v before MaxTimeout", bs)
	}
	r.clk.Step(time.Millisecond)
	waitFor(t, "e sent at MaxTimeout although a is in flight", r.sent(2))
	r.release <- struct{}{}
	r.release <- struct{}{}
	wait(t, a, e)
	r.check(t, [][]string{{"a"}, {"e"}}, []string{FlushNow, FlushTimeout})
}

// TestAdmitFullFirst: a batch that fills while Admit waits is closed and
// gets the next admission; the requests after it form the next batch.
func TestAdmitFullFirst(t *testing.T) {
	r := newAdmitRig(t, 2)
	chs := []chan error{add(r.b, context.Background(), "a")}
	waitFor(t, "a waiting for a token", func() bool { return r.admitCalls() == 1 })
	chs = append(chs, add(r.b, context.Background(), "b"))
	waitFor(t, "a, b closed full", func() bool { return r.b.Pending() == 0 })
	chs = append(chs, add(r.b, context.Background(), "c"))
	waitFor(t, "c open", func() bool { return r.b.Pending() == 1 })
	r.tokens <- struct{}{}
	waitFor(t, "a, b sent", r.sent(1))
	r.tokens <- struct{}{}
	r.release <- struct{}{} // a, b return: c goes
	r.release <- struct{}{}
	wait(t, chs...)
	r.check(t, [][]string{{"a", "b"}, {"c"}}, []string{FlushFull, FlushReturned})
}

// TestAdmitError: Admit's error reaches the executor, with the batch.
func TestAdmitError(t *testing.T) {
	r := newAdmitRig(t, 100)
	close(r.tokens)
	r.release <- struct{}{}
	wait(t, add(r.b, context.Background(), "a"))
	if len(r.flushes) != 1 || r.flushes[0].Err == nil || r.flushes[0].Admitted {
		t.Fatalf("flushes %+v, want one with Admit's error, not admitted", r.flushes)
	}
}
