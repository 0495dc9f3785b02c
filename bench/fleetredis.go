package bench

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
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// redisServer is a redis-server started by the fleet scenario (as
// limiter/fleet/fleettest starts one for tests): on 127.0.0.1, a free port,
// a random password in a file, no persistence, so a kill loses the budget.
type redisServer struct {
	bin, dir     string
	Addr         string
	password     string
	PasswordFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
	log  *bytes.Buffer
}

// redisBin finds redis-server: bin if set, else $PATH, else /usr/bin.
func redisBin(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", fmt.Errorf("redis-server not found: install the Debian package redis-server (make setup) or pass --redis-server PATH")
}

// startRedis starts a redis-server; Close stops it and removes its files.
func startRedis(bin string) (*redisServer, error) {
	bin, err := redisBin(bin)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "cloudgate-bench-redis-")
	if err != nil {
		return nil, err
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	r := &redisServer{bin: bin, dir: dir, password: hex.EncodeToString(b[:])}
	r.PasswordFile = filepath.Join(dir, "redis-password")
	if err := os.WriteFile(r.PasswordFile, []byte(r.password+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for range 3 {
		var port int
		if port, err = freeTCPPort(); err != nil {
			break
		}
		r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = r.start(); err == nil {
			return r, nil
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server did not start: %w", err)
}

func (r *redisServer) start() error {
	_, port, _ := net.SplitHostPort(r.Addr)
	conf := fmt.Sprintf("bind 127.0.0.1\nport %s\nrequirepass %s\nsave \"\"\nappendonly no\ndir %s\ndaemonize no\nloglevel warning\nlogfile \"\"\n",
		port, r.password, r.dir)
	confFile := filepath.Join(r.dir, "redis.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(r.bin, confFile)
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedBuffer{b: log, mu: &r.mu}, &lockedBuffer{b: log, mu: &r.mu}
	if err := cmd.Start(); err != nil {
		return err
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	c := redis.NewClient(&redis.Options{
		Addr: r.Addr, Password: r.password, DisableIdentity: true, MaxRetries: -1,
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
			return fmt.Errorf("redis-server not answering on %s: %v", r.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.mu.Lock()
	r.cmd, r.exit, r.log = cmd, exit, log
	r.mu.Unlock()
	return nil
}

func (r *redisServer) logs(b *bytes.Buffer) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return b.String()
}

// Kill stops the server at once (SIGKILL); its data is lost.
func (r *redisServer) Kill() {
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
	}
}

// Restart starts the server again on the same address and password.
func (r *redisServer) Restart() error {
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = r.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("restart redis-server on %s: %w", r.Addr, err)
}

// Close kills the server and removes its directory.
func (r *redisServer) Close() {
	r.Kill()
	os.RemoveAll(r.dir)
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func freeTCPPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
