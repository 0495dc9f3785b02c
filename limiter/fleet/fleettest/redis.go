// Package fleettest starts a real redis-server (Server) for tests and benchmarks of
// the fleet limiter: on 127.0.0.1, on a free port, with a random password
// (requirepass, read by cloudgate from a file), without persistence. Under
// CI (CI or CLOUDGATE_CACHE_DIR set, as `make test` does) a missing
// redis-server fails the test; otherwise the test is skipped. Install it
// with `make setup` (Debian package redis-server).
package fleettest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/cloudgate/cloudgate/limiter/fleet"
)

// Redis is a redis-server started by a test. Its methods are safe for
// concurrent use.
type Redis struct {
	tb           testing.TB
	srv          *Server
	Addr         string // 127.0.0.1:port
	Password     string
	PasswordFile string // holds Password, for fleet.Config
	admin        *redis.Client
}

// Bin returns the path of redis-server, failing tb under CI and skipping
// it otherwise when it is missing.
func Bin(tb testing.TB) string {
	tb.Helper()
	p, err := FindServer("")
	if err == nil {
		return p
	}
	msg := err.Error()
	if os.Getenv("CI") != "" || os.Getenv("CLOUDGATE_CACHE_DIR") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// Start starts a redis-server and stops it in tb.Cleanup.
func Start(tb testing.TB) *Redis {
	tb.Helper()
	srv, err := StartServer(ServerOptions{Bin: Bin(tb), Dir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	r := &Redis{tb: tb, srv: srv, Addr: srv.Addr, Password: srv.Password, PasswordFile: srv.PasswordFile, admin: srv.Client()}
	tb.Cleanup(func() {
		_ = r.admin.Close()
		r.Kill()
	})
	return r
}

// Server returns the underlying server (for replicas and Sentinels).
func (r *Redis) Server() *Server { return r.srv }

// Config returns a fleet configuration for account on this server.
func (r *Redis) Config(account string) fleet.Config {
	return fleet.Config{
		Redis:   fleet.RedisConfig{Address: r.Addr, PasswordFile: r.PasswordFile},
		Account: account,
	}
}

// Admin returns a client for the test's own commands (generous timeouts).
func (r *Redis) Admin() *redis.Client { return r.admin }

// Kill stops the server at once (SIGKILL) and waits for it to exit; the
// data is lost (no persistence). It does nothing if it is not running.
func (r *Redis) Kill() {
	if err := r.srv.Kill(); err != nil {
		r.tb.Error(err)
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
func (r *Redis) TryRestart() error { return r.srv.Restart() }

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
