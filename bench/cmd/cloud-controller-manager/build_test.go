//go:build linux

package main

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

// The CCM binary is built once per test run (go build -race: on a loaded
// 2-core machine each build takes minutes) and shared by the e2e tests;
// TestMain removes it.
var ccmBuild struct {
	once sync.Once
	dir  string
	path string
	err  error
	done chan struct{}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ccmBuild.dir != "" {
		_ = os.RemoveAll(ccmBuild.dir)
	}
	os.Exit(code)
}

// startCCMBuild starts building the CCM binary in the background (the first
// call only), with -race, which shares the compiled dependencies with this
// `go test -race` run, so it is mostly a link. The build is bounded by 20 min.
func startCCMBuild(t *testing.T) {
	t.Helper()
	ccmBuild.once.Do(func() {
		ccmBuild.done = make(chan struct{})
		goBin, err := exec.LookPath("go")
		if err != nil {
			ccmBuild.err = fmt.Errorf("the e2e tests build the CCM binary and need the go command: %w", err)
			close(ccmBuild.done)
			return
		}
		if ccmBuild.dir, err = os.MkdirTemp("", "cloudgate-ccm-"); err != nil {
			ccmBuild.err = err
			close(ccmBuild.done)
			return
		}
		ccmBuild.path = filepath.Join(ccmBuild.dir, "cloud-controller-manager")
		go func() {
			defer close(ccmBuild.done)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, goBin, "build", "-race", "-o", ccmBuild.path, ".")
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			if out, err := cmd.CombinedOutput(); err != nil {
				ccmBuild.err = fmt.Errorf("go build -race ./bench/cmd/cloud-controller-manager: %v\n%s", err, out)
			}
		}()
	})
}

// ccmBinary waits for the build startCCMBuild started and returns the
// binary's path.
func ccmBinary(ctx context.Context, t *testing.T) string {
	t.Helper()
	startCCMBuild(t)
	began := time.Now()
	select {
	case <-ccmBuild.done:
	case <-ctx.Done():
		t.Fatalf("waiting for the CCM build: %v", ctx.Err())
	}
	if ccmBuild.err != nil {
		t.Fatal(ccmBuild.err)
	}
	t.Logf("CCM binary ready (waited %.1fs)", time.Since(began).Seconds())
	return ccmBuild.path
}
