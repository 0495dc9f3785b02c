package fleet_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudgate/cloudgate/limiter/fleet"
	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
)

// TestProbe: the probe a replica's readiness uses answers nil while the real Redis
// answers PING, and an error naming that Redis and the reason (never the password)
// when it is killed, when the password is wrong, and when the config is not one a
// member could use; Redis restarted, it answers nil again.
func TestProbe(t *testing.T) {
	r := fleettest.Start(t)
	ctx := context.Background()
	cfg := r.Config("acct-probe")
	p, err := fleet.NewProbe(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("Redis up: %v", err)
	}

	r.Kill()
	err = p.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), cfg.Redis.Address) {
		t.Fatalf("Redis killed: %v, want an error naming %s", err, cfg.Redis.Address)
	}
	t.Logf("Redis killed: %v", err)
	r.Restart()
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("Redis restarted: %v", err)
	}

	wrong := cfg
	wrong.Redis.PasswordFile = filepath.Join(t.TempDir(), "wrong")
	const bad = "not-the-password-0123456789"
	if err := os.WriteFile(wrong.Redis.PasswordFile, []byte(bad+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wp, err := fleet.NewProbe(wrong)
	if err != nil {
		t.Fatal(err)
	}
	defer wp.Close()
	err = wp.Ping(ctx)
	if err == nil || strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), cfg.Redis.Address) {
		t.Fatalf("wrong password: %v, want an error naming the address and not the password", err)
	}
	t.Logf("wrong password: %v", err)

	missing := cfg
	missing.Redis.PasswordFile = filepath.Join(t.TempDir(), "absent")
	if _, err := fleet.NewProbe(missing); err == nil || !strings.Contains(err.Error(), "passwordFile") {
		t.Errorf("a password file that does not exist: %v, want an error naming passwordFile", err)
	}
}
