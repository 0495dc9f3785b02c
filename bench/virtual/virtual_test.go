package virtual

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClockIsVirtual: ten hours pass inside the bubble, exactly, without
// waiting for them.
func TestClockIsVirtual(t *testing.T) {
	var slept time.Duration
	err := Test(t, context.Background(), Options{}, func(ctx context.Context) error {
		start := time.Now()
		time.Sleep(10 * time.Hour)
		slept = time.Since(start)
		return nil
	})
	if err != nil || slept != 10*time.Hour {
		t.Fatalf("slept %v (err %v), want exactly 10h of virtual time", slept, err)
	}
}

// TestOuterCancelReachesBubble: a caller's context that has ended ends the
// bubble's at the first heartbeat, within a virtual second (a channel from
// outside cannot be waited on durably), and Test reports it. (One that ends
// later is seen at the next beat after it ends in real time, however far
// the virtual clock got meanwhile.)
func TestOuterCancelReachesBubble(t *testing.T) {
	outer, cancel := context.WithCancel(context.Background())
	cancel()
	var waited time.Duration
	err := Test(t, outer, Options{}, func(ctx context.Context) error {
		start := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(24 * time.Hour):
		}
		waited = time.Since(start)
		return nil
	})
	if !errors.Is(err, context.Canceled) || waited > time.Second {
		t.Fatalf("err %v after %v of virtual time; want context.Canceled within a second", err, waited)
	}
}

// TestFuncError: fn's error is Test's.
func TestFuncError(t *testing.T) {
	want := errors.New("boom")
	if err := Test(t, context.Background(), Options{}, func(context.Context) error { return want }); err != want {
		t.Fatalf("err %v, want %v", err, want)
	}
}

// TestStackBusy: a bubble goroutine that is runnable or running keeps the
// run alive; durably blocked ones and goroutines outside a bubble do not.
func TestStackBusy(t *testing.T) {
	for _, tc := range []struct {
		header string
		busy   bool
	}{
		{"goroutine 7 [runnable, synctest bubble 1]:\n", true},
		{"goroutine 7 [running, synctest bubble 3]:\n", true},
		{"goroutine 7 gp=0xc000 m=nil [preempted, synctest bubble 1]:\n", true},
		{"goroutine 7 [chan receive (durable), synctest bubble 1]:\n", false},
		{"goroutine 7 [chan receive, 3 minutes, synctest bubble 1]:\n", false},
		{"goroutine 7 [sync.Mutex.Lock, synctest bubble 1]:\n", false},
		{"goroutine 7 [IO wait, synctest bubble 1]:\n", false},
		{"goroutine 7 [running]:\n", false},
		{"goroutine 7 [runnable]:\n", false},
	} {
		dump := "goroutine 1 [chan receive]:\nmain.main()\n\n" + tc.header + "bench.f()\n\t/x.go:1 +0x1\n"
		if got := stackBusy([]byte(dump)); got != tc.busy {
			t.Errorf("%q: busy %v, want %v", tc.header, got, tc.busy)
		}
	}
}

// hogEnv makes the test binary a CPU hog (TestHelperHog) or a bubble that
// deadlocks (TestHelperDeadlock) when re-executed by the tests below.
const hogEnv = "CLOUDGATE_VIRTUAL_HELPER"

// TestHelperHog is a busy loop for at most a minute when the test binary
// is re-executed as a CPU hog; otherwise it does nothing.
func TestHelperHog(t *testing.T) {
	if os.Getenv(hogEnv) != "hog" {
		return
	}
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
	}
}

// TestHelperDeadlock is a bubble blocked for good on a channel made
// outside it (not durable: the clock stops) when the test binary is
// re-executed for it; otherwise it does nothing.
func TestHelperDeadlock(t *testing.T) {
	if os.Getenv(hogEnv) != "deadlock" {
		return
	}
	outside := make(chan struct{})
	_ = Test(t, context.Background(), Options{Stall: time.Second, DumpDir: os.Getenv(hogEnv + "_DIR")}, func(context.Context) error {
		<-outside
		return nil
	})
	t.Fatal("the deadlocked bubble returned")
}

// helper re-executes the test binary as one of the helpers above.
func helper(t *testing.T, ctx context.Context, kind string, env ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelper"+kind+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), hogEnv+"="+strings.ToLower(kind)), env...)
	return cmd
}

// TestSlowRunBesideHogsCompletes: a bubble that computes for several
// stall windows without advancing its clock (as the service controller's
// N×M node comparison does), beside two busy-loop processes, runs to the
// end: a still clock with a runnable bubble and CPU progress is slow, not
// stalled, and must not end the process after one window of a still
// clock.
func TestSlowRunBesideHogsCompletes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 2 {
		hog := helper(t, ctx, "Hog")
		if err := hog.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = hog.Process.Kill(); _ = hog.Wait() })
	}
	const stall = time.Second
	var virtualElapsed time.Duration
	var sum uint64
	start := time.Now()
	err := Test(t, ctx, Options{Stall: stall}, func(context.Context) error {
		v := time.Now()
		// Compute for 5 stall windows of real time; the virtual clock
		// does not move meanwhile.
		for end := RealNow().Add(5 * stall); RealNow().Before(end); {
			for i := range uint64(1 << 16) {
				sum += i * i
			}
		}
		virtualElapsed = time.Since(v)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if real := time.Since(start); real < 4*stall || virtualElapsed != 0 {
		t.Fatalf("the bubble computed for %v of real time and %v of virtual time; want ≥ %v real and none virtual (sum %d)", real, virtualElapsed, 4*stall, sum)
	}
}

// TestDeadlockIsReported: a bubble blocked on a channel made outside it is
// still a stall: the process ends (exit status 3) within a few windows,
// names the stall and leaves a goroutine dump showing the blocked
// goroutine without "(durable)".
func TestDeadlockIsReported(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := helper(t, ctx, "Deadlock", hogEnv+"_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("deadlocked bubble: err %v, want exit status 3; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "virtual: stall") {
		t.Fatalf("no stall report in the output:\n%s", out)
	}
	dumps, _ := filepath.Glob(filepath.Join(dir, "virtual-stall-*.txt"))
	if len(dumps) != 1 {
		t.Fatalf("dumps %v, want one", dumps)
	}
	dump, err := os.ReadFile(dumps[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dump), "[chan receive, synctest bubble") || !strings.Contains(string(dump), "TestHelperDeadlock") {
		t.Fatalf("the dump does not show the blocked bubble goroutine:\n%s", dump)
	}
}
