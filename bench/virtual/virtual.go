// Package virtual runs a function on a virtual clock: inside a
// testing/synctest bubble, where time advances only when every goroutine
// started in it is durably blocked (on a channel, timer, sync.Cond,
// WaitGroup or select created in the bubble). A simulation run there gives
// the same figures on a fast, a slow or a loaded machine: CPU time costs no
// simulated time.
//
// A bubble needs a *testing.T: Test runs one from a test, Main from a
// command (it hosts the bubble with testing.Main). Both watch the bubble
// from outside for a stall: its clock has not advanced for Options.Stall
// of real time, no goroutine of the bubble is runnable or running, and the
// process used (almost) no CPU meanwhile. A slow run is not a stall: a
// bubble computing for minutes without advancing its clock (the service
// controller comparing N×M nodes costs no virtual time), or one starved
// of CPU by other processes, keeps running however long it takes. On a
// stall they write every goroutine's stack (runtime/pprof, debug=2) to a
// file and end the process with its name. In that dump a bubble's
// goroutine that is durably blocked is marked "(durable)" (or waits in
// "synctest.Wait"/"synctest.Run"); one without the mark is the blocker:
// typically a channel or mutex made or held outside the bubble, a socket,
// or a real system call.
package virtual

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// Options tune the watchdog.
type Options struct {
	// Stall is how long (real time) the virtual clock may stand still,
	// with nothing in the bubble runnable and no CPU progress, before the
	// goroutines are dumped and the process ends; default 2 min. While the
	// bubble computes, it is checked again every Stall.
	Stall time.Duration
	// DumpDir receives the dump (default os.TempDir()).
	DumpDir string
	// Drain is how much longer the bubble's clock runs after fn returns,
	// so that goroutines still waiting on a timer with a context nobody
	// cancels (a controller's context.TODO() call waiting for a token)
	// can finish: the clock stops when the bubble's main goroutine
	// returns, and a goroutine left blocked then fails the bubble.
	// Default 15 minutes (virtual: it costs only the timers that fire).
	Drain time.Duration
}

// Func is the simulation: ctx is created inside the bubble (a context or
// channel from outside would not block durably) and ends when the
// caller's context does.
type Func func(ctx context.Context) error

// Test runs fn inside a synctest bubble of t, ctx's cancellation
// forwarded into it, with the stall watchdog outside, and returns fn's
// error.
func Test(t *testing.T, ctx context.Context, o Options, fn Func) error {
	if o.Stall <= 0 {
		o.Stall = 2 * time.Minute
	}
	if o.DumpDir == "" {
		o.DumpDir = os.TempDir()
	}
	if o.Drain <= 0 {
		o.Drain = 15 * time.Minute
	}
	var (
		clock   atomic.Int64 // the bubble's time, unix ns, advanced by its heartbeat
		stopped atomic.Bool  // ctx ended (read by the heartbeat inside the bubble)
	)
	done := make(chan struct{})
	defer close(done)
	realNow.Store(time.Now().UnixNano())
	go watch(o, &clock, done)
	// AfterFunc runs in its own goroutine, some real time after ctx ends,
	// while the bubble's clock may race ahead; an already ended ctx is
	// seen at the first beat.
	stopped.Store(ctx.Err() != nil)
	stopCtx := context.AfterFunc(ctx, func() { stopped.Store(true) })
	defer stopCtx()

	var err error
	synctest.Test(t, func(*testing.T) {
		inner, cancel := context.WithCancel(context.Background())
		defer cancel()
		beat := make(chan struct{})
		go func() {
			// One beat per virtual second: it tells the watchdog the clock
			// moves and brings the outer cancellation in (an atomic, since
			// no goroutine inside may wait on a channel from outside).
			defer close(beat)
			for inner.Err() == nil {
				clock.Store(time.Now().UnixNano())
				if stopped.Load() {
					cancel()
					return
				}
				select {
				case <-inner.Done():
				case <-time.After(time.Second):
				}
			}
		}()
		err = fn(inner)
		cancel()
		<-beat
		time.Sleep(o.Drain)
	})
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return err
}

// realNow is the real time, published each second by the watchdog.
var realNow atomic.Int64

// RealNow is the real (wall-clock) time to a second, readable inside the
// bubble, where time.Now is virtual.
func RealNow() time.Time { return time.Unix(0, realNow.Load()) }

// watch ends the process with a goroutine dump when the bubble stalls:
// clock stands still for o.Stall of real time while the process made no
// CPU progress and no goroutine of a bubble is runnable. Wall-clock time
// alone never ends a run: a still clock with CPU progress or a runnable
// bubble goroutine starts a new window of o.Stall.
func watch(o Options, clock *atomic.Int64, done <-chan struct{}) {
	last, since, cpu := clock.Load(), time.Now(), processCPU()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		realNow.Store(time.Now().UnixNano())
		if v := clock.Load(); v != last {
			last, since, cpu = v, time.Now(), processCPU()
			continue
		}
		window := time.Since(since)
		if window < o.Stall {
			continue
		}
		used := processCPU() - cpu
		busy := bubbleBusy()
		if busy || cpuProgress(used, window) {
			// Slow, not stalled: look again after another window.
			since, cpu = time.Now(), processCPU()
			continue
		}
		path := filepath.Join(o.DumpDir, fmt.Sprintf("virtual-stall-%d.txt", os.Getpid()))
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 2)
			_ = f.Close()
		}
		fmt.Fprintf(os.Stderr, "virtual: stall: the virtual clock stood still for %v of real time with no goroutine of the bubble runnable and %v of CPU used: "+
			"a goroutine in the bubble is blocked on something not durable; every goroutine's stack is in %s (the blocker lacks \"(durable)\")\n", window.Round(time.Second), used, path)
		os.Exit(3)
	}
}

// cpuProgress reports whether the process used enough CPU in window to be
// computing rather than idle: 2 % of one core (at least 100 ms). An idle
// process (a ticker, the runtime's background work) uses well under that;
// a computing one, even on a machine busy with other work, well over.
func cpuProgress(used, window time.Duration) bool {
	return used >= max(100*time.Millisecond, window/50)
}

// processCPU is the CPU time (user + system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		// Unknown: count it as progress, so that a missing figure never
		// ends a run (a bubble with nothing runnable still stalls: see
		// bubbleBusy).
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bubbleBusy reports whether a goroutine of a synctest bubble is runnable
// or running: its header in a full stack dump reads
// "goroutine N [runnable, synctest bubble M]:" (or running, preempted,
// copystack: states of a goroutine that has work to do).
func bubbleBusy() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	return stackBusy(buf)
}

// stackBusy is bubbleBusy on a dump in runtime.Stack's format.
func stackBusy(dump []byte) bool {
	for line := range bytes.Lines(dump) {
		if !bytes.HasPrefix(line, []byte("goroutine ")) || !bytes.Contains(line, []byte("synctest bubble")) {
			continue
		}
		open := bytes.IndexByte(line, '[')
		if open < 0 {
			continue
		}
		state, _, _ := bytes.Cut(line[open+1:], []byte(","))
		switch string(bytes.TrimSuffix(state, []byte("]:\n"))) {
		case "runnable", "running", "preempted", "copystack":
			return true
		}
	}
	return false
}

// Main runs fn(ctx) inside a synctest bubble from a command's main (not a
// test) and returns its error. It hosts the bubble in testing.Main, so
// it must be called once, from main, after the command parsed its own
// flags: os.Args is replaced for the testing package.
func Main(ctx context.Context, o Options, fn Func) error {
	var err error
	ran := false
	tests := []testing.InternalTest{{Name: "VirtualTime", F: func(t *testing.T) {
		ran = true
		err = Test(t, ctx, o, fn)
		// Exit here, with fn's outcome: testing.Main would print PASS/FAIL
		// lines into the command's output.
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}}}
	os.Args = []string{os.Args[0], "-test.run=^VirtualTime$"}
	testing.Main(func(pat, str string) (bool, error) { return true, nil }, tests, nil, nil)
	if !ran {
		return fmt.Errorf("virtual: the bubble did not run")
	}
	return err
}
