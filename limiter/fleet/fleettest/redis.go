// Package fleettest starts a real redis-server for tests and benchmarks of
// the fleet limiter: on 127.0.0.1, on a free port, with a random password
// (requirepass, read by cloudgate from a file), without persistence. Under
// CI (CI or CLOUDGATE_CACHE_DIR set, as `make test` does) a missing
// redis-server fails the test; otherwise the test is skipped. Install it
// with `make setup` (Debian package redis-server).
package fleettest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// Redis is a redis-server started by a test. Its methods are safe for
// concurrent use.
type Redis struct {
	tb           testing.TB
	bin          string
	dir          string
	Addr         string // 127.0.0.1:port
	Password     string
	PasswordFile string // holds Password, for fleet.Config

	mu    sync.Mutex
	cmd   *exec.Cmd
	exit  chan struct{}
	log   *bytes.Buffer
	admin *redis.Client
}

// Bin returns the path of redis-server, failing tb under CI and skipping
// it otherwise when it is missing.
func Bin(tb testing.TB) string {
	tb.Helper()
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server"
	}
	msg := "redis-server not found: install the Debian package redis-server (make setup, or bash .ci/setup.sh)"
	if os.Getenv("CI") != "" || os.Getenv("CLOUDGATE_CACHE_DIR") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// Start starts a redis-server and stops it in tb.Cleanup.
func Start(tb testing.TB) *Redis {
	tb.Helper()
	bin := Bin(tb)
	var b [16]byte
	_, _ = rand.Read(b[:])
	r := &Redis{tb: tb, bin: bin, dir: tb.TempDir(), Password: hex.EncodeToString(b[:])}
	r.PasswordFile = filepath.Join(r.dir, "redis-password")
	if err := os.WriteFile(r.PasswordFile, []byte(r.Password+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	var lastErr error
	for range 3 {
		port, err := freePort()
		if err != nil {
			tb.Fatal(err)
		}
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = r.start(); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		tb.Fatalf("redis-server did not start: %v", lastErr)
	}
	r.admin = redis.NewClient(&redis.Options{
		Addr: r.Addr, Password: r.Password, DisableIdentity: true, MaxRetries: 3,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	tb.Cleanup(func() {
		_ = r.admin.Close()
		r.Kill()
	})
	return r
}

// Config returns a fleet configuration for account on this server.
func (r *Redis) Config(account string) fleet.Config {
	return fleet.Config{
		Redis:   fleet.RedisConfig{Address: r.Addr, PasswordFile: r.PasswordFile},
		Account: account,
	}
}

// Admin returns a client for the test's own commands (generous timeouts).
func (r *Redis) Admin() *redis.Client { return r.admin }

func (r *Redis) start() error {
	_, port, _ := net.SplitHostPort(r.Addr)
	conf := fmt.Sprintf("bind 127.0.0.1\nport %s\nrequirepass %s\nsave \"\"\nappendonly no\ndir %s\ndaemonize no\nloglevel warning\nlogfile \"\"\n",
		port, r.Password, r.dir)
	confFile := filepath.Join(r.dir, "redis.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(r.bin, confFile)
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedWriter{w: log, mu: &r.mu}, &lockedWriter{w: log, mu: &r.mu}
	if err := cmd.Start(); err != nil {
		return err
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	c := redis.NewClient(&redis.Options{
		Addr: r.Addr, Password: r.Password, DisableIdentity: true, MaxRetries: -1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			break
		}
		select {
		case <-exit:
			return fmt.Errorf("redis-server exited: %s", r.logs(log))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exit
			return fmt.Errorf("redis-server not answering on %s: %v\n%s", r.Addr, err, r.logs(log))
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	r.cmd, r.exit, r.log = cmd, exit, log
	r.mu.Unlock()
	return nil
}

func (r *Redis) logs(b *bytes.Buffer) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return b.String()
}

// Kill stops the server at once (SIGKILL) and waits for it to exit; the
// data is lost (no persistence). It does nothing if it is not running.
func (r *Redis) Kill() {
	r.mu.Lock()
	cmd, exit := r.cmd, r.exit
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	select {
	case <-exit:
	case <-time.After(10 * time.Second):
		r.tb.Errorf("redis-server (pid %d) did not exit after kill", cmd.Process.Pid)
	}
}

// Restart starts the server again on the same address and password,
// failing the test if it cannot. Call it from the test's goroutine.
func (r *Redis) Restart() {
	r.tb.Helper()
	if err := r.TryRestart(); err != nil {
		r.tb.Fatal(err)
	}
}

// TryRestart is Restart for other goroutines: it returns the error.
func (r *Redis) TryRestart() error {
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = r.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("restart redis-server on %s: %w", r.Addr, err)
}

// Pause makes the server answer no client for d (CLIENT PAUSE ALL): a slow
// Redis.
func (r *Redis) Pause(d time.Duration) {
	r.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.admin.Do(ctx, "CLIENT", "PAUSE", d.Milliseconds(), "ALL").Err(); err != nil {
		r.tb.Fatalf("CLIENT PAUSE: %v", err)
	}
}

// Unpause ends a Pause early.
func (r *Redis) Unpause() {
	r.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.admin.Do(ctx, "CLIENT", "UNPAUSE").Err(); err != nil {
		r.tb.Fatalf("CLIENT UNPAUSE: %v", err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
