//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A Build is one `go build -race` of a CCM (any main package) shared by the tests of one test
// binary: the first Start begins it in the background, so it links while a control plane
// starts; Binary waits for it; Remove, from TestMain, deletes it. -race shares the compiled
// dependencies with the `go test -race` run, so it is mostly a link, but on a loaded 2-core
// machine a link takes minutes: tests that run the same binary build it once.
type Build struct {
	Dir     string        // where go build runs; "" is the test's working directory
	Pkg     string        // the package; "" is "."
	Args    []string      // more go build flags (-ldflags ...)
	Timeout time.Duration // 20 min if 0

	once sync.Once
	tmp  string
	path string
	err  error
	done chan struct{}
}

// Start begins the build (the first call only).
func (b *Build) Start() {
	b.once.Do(func() {
		b.done = make(chan struct{})
		goBin, err := exec.LookPath("go")
		if err != nil {
			b.err = fmt.Errorf("the e2e tests build the CCM binary and need the go command: %w", err)
			close(b.done)
			return
		}
		if b.tmp, err = os.MkdirTemp("", "cloudgate-ccm-"); err != nil {
			b.err = err
			close(b.done)
			return
		}
		b.path = filepath.Join(b.tmp, "cloud-controller-manager")
		timeout := b.Timeout
		if timeout == 0 {
			timeout = 20 * time.Minute
		}
		go func() {
			defer close(b.done)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			b.err = goBuildRace(ctx, goBin, b.Dir, b.path, b.pkg(), b.Args)
		}()
	})
}

func (b *Build) pkg() string {
	if b.Pkg == "" {
		return "."
	}
	return b.Pkg
}

// Binary waits for the build (starting it if no test did) and returns the binary's path; a
// failed build fails t.
func (b *Build) Binary(ctx context.Context, t *testing.T) string {
	t.Helper()
	b.Start()
	began := time.Now()
	select {
	case <-b.done:
	case <-ctx.Done():
		t.Fatalf("waiting for the build of %s: %v", b.pkg(), ctx.Err())
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	t.Logf("CCM binary ready (waited %.1fs)", time.Since(began).Seconds())
	return b.path
}

// Remove deletes the binary; call it from TestMain after m.Run. A build still running is
// killed by its own timeout or when the test binary exits (Pdeathsig).
func (b *Build) Remove() {
	if b.tmp != "" {
		_ = os.RemoveAll(b.tmp)
	}
}

// goBuildRace runs `go build -race [args] -o out pkg` in dir in its own process group, killed
// with the group when ctx ends or the test binary dies.
func goBuildRace(ctx context.Context, goBin, dir, out, pkg string, args []string) error {
	argv := append(append([]string{"build", "-race"}, args...), "-o", out, pkg)
	cmd := exec.CommandContext(ctx, goBin, argv...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -race %s (in %s): %v\n%s", pkg, dirName(dir), err, output)
	}
	return nil
}

func dirName(dir string) string {
	if dir == "" {
		return "the test's directory"
	}
	return dir
}
