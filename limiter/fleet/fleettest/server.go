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
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// FindServer returns the redis-server binary: bin if set, else $PATH, else
// /usr/bin/redis-server.
func FindServer(bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", fmt.Errorf("redis-server not found: install the Debian package redis-server (make setup, or bash .ci/setup.sh)")
}

// ServerOptions select what to start.
type ServerOptions struct {
	// Bin is the redis-server binary ("" finds it).
	Bin string
	// Dir holds the configuration and the password file; "" makes a
	// temporary directory that Close removes.
	Dir string
	// Password is the requirepass (and, for replicas and Sentinels, the
	// master's password); "" generates one.
	Password string
	// ReplicaOf, when set (host:port), starts a replica of that master.
	ReplicaOf string
	// Sentinel, when set, starts a Sentinel monitoring this master
	// (host:port) under MasterName.
	Sentinel   string
	MasterName string
	// Cluster starts a Redis Cluster node (cluster-enabled); the caller
	// assigns its slots (CLUSTER ADDSLOTSRANGE).
	Cluster bool
}

// Server is one redis-server process (the Debian package's binary), for the
// fleet limiter's tests and for the fleet benchmark: on 127.0.0.1, on a free
// port, with a random password in a file, without persistence (a kill loses
// the data, as a crashed cache-only Redis does). StartServer also starts
// replicas and Sentinels (the same binary with --sentinel) for the
// high-availability tests. Its methods are safe for concurrent use.
type Server struct {
	opts         ServerOptions
	ownDir       bool
	Addr         string // 127.0.0.1:port
	Password     string
	PasswordFile string // holds Password

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
	log  *bytes.Buffer
}

// StartServer starts a server; Close stops it.
func StartServer(o ServerOptions) (*Server, error) {
	bin, err := FindServer(o.Bin)
	if err != nil {
		return nil, err
	}
	o.Bin = bin
	s := &Server{opts: o}
	if o.Dir == "" {
		if s.opts.Dir, err = os.MkdirTemp("", "cloudgate-redis-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	if o.Password == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		s.opts.Password = hex.EncodeToString(b[:])
	}
	s.Password = s.opts.Password
	s.PasswordFile = filepath.Join(s.opts.Dir, "redis-password")
	if err := os.WriteFile(s.PasswordFile, []byte(s.Password+"\n"), 0o600); err != nil {
		s.removeDir()
		return nil, err
	}
	for range 3 {
		var port int
		if port, err = freePort(); err != nil {
			break
		}
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err = s.start(); err == nil {
			return s, nil
		}
	}
	s.removeDir()
	return nil, fmt.Errorf("redis-server did not start: %w", err)
}

func (s *Server) removeDir() {
	if s.ownDir {
		os.RemoveAll(s.opts.Dir)
	}
}

func (s *Server) config() (file string, args []string) {
	_, port, _ := net.SplitHostPort(s.Addr)
	name := "redis-" + port + ".conf"
	conf := fmt.Sprintf("bind 127.0.0.1\nport %s\ndir %s\ndaemonize no\nloglevel warning\nlogfile \"\"\n", port, s.opts.Dir)
	switch {
	case s.opts.Sentinel != "":
		host, mport, _ := net.SplitHostPort(s.opts.Sentinel)
		conf += fmt.Sprintf("requirepass %s\nsentinel monitor %s %s %s 1\nsentinel auth-pass %[2]s %[5]s\n"+
			"sentinel down-after-milliseconds %[2]s 500\nsentinel failover-timeout %[2]s 2000\n",
			s.Password, s.opts.MasterName, host, mport, s.Password)
		args = []string{"--sentinel"}
	default:
		conf += fmt.Sprintf("requirepass %s\nmasterauth %s\nsave \"\"\nappendonly no\n", s.Password, s.Password)
		if s.opts.Cluster {
			conf += fmt.Sprintf("cluster-enabled yes\ncluster-config-file nodes-%s.conf\n", port)
		}
		if s.opts.ReplicaOf != "" {
			host, mport, _ := net.SplitHostPort(s.opts.ReplicaOf)
			conf += fmt.Sprintf("replicaof %s %s\n", host, mport)
		}
	}
	file = filepath.Join(s.opts.Dir, name)
	// A Sentinel rewrites its configuration file: write it afresh only once.
	if _, err := os.Stat(file); err == nil && s.opts.Sentinel != "" {
		return file, args
	}
	_ = os.WriteFile(file, []byte(conf), 0o600)
	return file, args
}

func (s *Server) start() error {
	file, args := s.config()
	if _, err := os.Stat(file); err != nil {
		return err
	}
	cmd := exec.Command(s.opts.Bin, append([]string{file}, args...)...)
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = &lockedBuffer{b: log, mu: &s.mu}, &lockedBuffer{b: log, mu: &s.mu}
	if err := cmd.Start(); err != nil {
		return err
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	c := redis.NewClient(&redis.Options{
		Addr: s.Addr, Password: s.Password, DisableIdentity: true, MaxRetries: -1,
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
			return fmt.Errorf("redis-server exited: %s", s.logs(log))
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exit
			return fmt.Errorf("redis-server not answering on %s: %v\n%s", s.Addr, err, s.logs(log))
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.mu.Lock()
	s.cmd, s.exit, s.log = cmd, exit, log
	s.mu.Unlock()
	return nil
}

func (s *Server) logs(b *bytes.Buffer) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return b.String()
}

// Logs returns what the running server wrote.
func (s *Server) Logs() string {
	s.mu.Lock()
	b := s.log
	s.mu.Unlock()
	if b == nil {
		return ""
	}
	return s.logs(b)
}

// Kill stops the server at once (SIGKILL) and waits for it to exit; its
// data is lost. It does nothing if the server is not running, and returns an
// error if it did not exit within 10 s.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd, exit := s.cmd, s.exit
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Kill()
	select {
	case <-exit:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("redis-server (pid %d) did not exit after kill", cmd.Process.Pid)
	}
}

// Restart starts the server again on the same address and password.
func (s *Server) Restart() error {
	var err error
	for range 50 { // the port may linger briefly after the kill
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("restart redis-server on %s: %w", s.Addr, err)
}

// Close kills the server and removes the directory Start made.
func (s *Server) Close() error {
	err := s.Kill()
	s.removeDir()
	return err
}

// Client returns a client for a test's own commands (generous timeouts,
// retries); the caller closes it.
func (s *Server) Client() *redis.Client {
	return redis.NewClient(&redis.Options{
		Addr: s.Addr, Password: s.Password, DisableIdentity: true, MaxRetries: 3,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
