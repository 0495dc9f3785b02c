//go:build linux

// Package e2e is the test support for end-to-end tests against a real control plane:
// child processes in their own process groups, etcd + kube-apiserver on loopback
// ports (binaries from CLOUDGATE_ETCD and CLOUDGATE_KUBE_APISERVER, built by
// .ci/control-plane.sh), kubeconfigs, and a Prometheus text scraper. It is the module
// github.com/cloudgate/cloudgate/testkit, apart from the library, so that every module's
// e2e tests (cmd, bench, charts/test, the provider modules) share one harness and the
// library's users never download it.
package e2e

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Process is a child process whose whole process group is ended at test cleanup.
type Process struct {
	pid  int
	name string
	Log  string // path of its combined stdout and stderr
	done chan struct{}
	err  error // valid after done is closed
}

// StartProcess runs bin in its own process group, logging to dir/name.log. Cleanup sends
// SIGTERM to the group, then SIGKILL after 10 s; on failure it prints the log's tail.
// Pdeathsig kills the child should the test binary itself die.
func StartProcess(t *testing.T, dir, name, bin string, args ...string) *Process {
	t.Helper()
	p := &Process{name: name, Log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- last lines of %s ---\n%s", p.Log, Tail(p.Log, 25))
		}
	})
	return p
}

// Quit asks a Go child for a goroutine dump (SIGQUIT makes the runtime print every stack
// and exit) and logs the stacks that mention a goroutine's main or cloudgate code: for a
// process that is up but not answering.
func (p *Process) Quit(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(p.pid, syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	data, err := os.ReadFile(p.Log)
	if err != nil {
		t.Log(err)
		return
	}
	var keep []string
	for _, g := range strings.Split(string(data), "\n\n") {
		if strings.HasPrefix(g, "goroutine ") && (strings.HasPrefix(g, "goroutine 1 ") ||
			strings.Contains(g, "github.com/cloudgate/cloudgate") || strings.Contains(g, "cloud-provider@")) {
			keep = append(keep, g)
		}
	}
	t.Logf("--- goroutines of %s (%d kept) ---\n%s", p.name, len(keep), strings.Join(keep, "\n\n"))
}

// Pid is the process's ID (for reading its /proc entries, e.g. its RSS).
func (p *Process) Pid() int { return p.pid }

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Tail returns the last n lines of a file.
func Tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// GrepLines returns the lines of a file matching re.
func GrepLines(t *testing.T, path string, re *regexp.Regexp) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// FreePort returns a port of 127.0.0.1 that nothing listens on now, for a process the test
// starts. It is drawn below the kernel's ephemeral range (ip_local_port_range), and never
// twice in one test binary: the kernel takes outgoing connections' source ports from that
// range, the same one it picks a ":0" listener's port from, so between the check and the
// process's bind a connection could take such a port and the process would exit "bind:
// address already in use".
func FreePort(t *testing.T) int {
	t.Helper()
	lo, hi := portsBelowEphemeral()
	freePorts.mu.Lock()
	defer freePorts.mu.Unlock()
	if freePorts.given == nil {
		freePorts.given = map[int]bool{}
	}
	for range 1000 {
		p := lo + mathrand.IntN(hi-lo)
		if freePorts.given[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		freePorts.given[p] = true
		return p
	}
	t.Fatalf("no free port of 127.0.0.1 in [%d, %d) after 1,000 tries", lo, hi)
	return 0
}

var freePorts struct {
	mu    sync.Mutex
	given map[int]bool
}

// portsBelowEphemeral is [lo, hi): up to 16,384 ports just below the kernel's ephemeral
// range (Linux's default 32768–60999 gives [16384, 32768)), never below 1024.
func portsBelowEphemeral() (lo, hi int) {
	hi = 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 2048 {
				hi = v
			}
		}
	}
	return max(1024, hi-16384), hi
}

// Poll calls cond every interval until it returns true or an error, or timeout passes; it
// returns the last error seen (or a timeout error naming what).
func Poll(ctx context.Context, what string, interval, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("%s: not done after %v: %w", what, timeout, last)
			}
			return fmt.Errorf("%s: not done after %v", what, timeout)
		case <-time.After(interval):
		}
	}
}

// RandomToken returns 32 random hex characters (a bearer token).
func RandomToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// CCMUser is the identity the CCM runs as: deploy/rbac.yaml's ServiceAccount. A static token
// for it in --token-auth-file lets the test run the CCM with exactly that RBAC.
const CCMUser = "system:serviceaccount:kube-system:cloudgate-cloud-controller-manager"

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	URL        string // https://127.0.0.1:PORT
	CAFile     string // the apiserver's self-signed certificate
	AdminToken string // system:masters
	CCMToken   string // CCMUser
	Admin      *kubernetes.Clientset
	Apiserver  *Process
}

// StartControlPlane starts etcd and kube-apiserver (binaries from CLOUDGATE_ETCD and
// CLOUDGATE_KUBE_APISERVER) on free loopback ports and waits for /readyz. Flags follow
// shared/README.md's recipe.
func StartControlPlane(ctx context.Context, t *testing.T, dir, etcdBin, apiserverBin string) *ControlPlane {
	t.Helper()
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", FreePort(t))
	StartProcess(t, dir, "etcd", etcdBin,
		"--name=e2e", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL,
		"--unsafe-no-fsync", // a throw-away store: skip the disk flushes
	)

	cp := &ControlPlane{AdminToken: RandomToken(t), CCMToken: RandomToken(t)}
	tokens := filepath.Join(dir, "tokens.csv")
	WriteFile(t, tokens, fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n%s,%s,ccm-uid,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n",
		cp.AdminToken, cp.CCMToken, CCMUser))
	saKey := filepath.Join(dir, "sa.key")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	WriteFile(t, saKey, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})))

	port := FreePort(t)
	cp.URL = fmt.Sprintf("https://127.0.0.1:%d", port)
	certDir := filepath.Join(dir, "apiserver-certs")
	cp.CAFile = filepath.Join(certDir, "apiserver.crt")
	cp.Apiserver = StartProcess(t, dir, "kube-apiserver", apiserverBin,
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // needed with a loopback advertise address
		"--secure-port="+strconv.Itoa(port), "--cert-dir="+certDir,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer="+cp.URL,
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--authorization-mode=RBAC", "--token-auth-file="+tokens,
	)

	// /readyz over TLS that is not verified yet: the certificate is written at start-up.
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // loopback, self-signed
	}}
	err = Poll(ctx, "kube-apiserver /readyz", 250*time.Millisecond, time.Minute, func() (bool, error) {
		if done, err := cp.Apiserver.Exited(); done {
			return false, fmt.Errorf("kube-apiserver exited: %v", err)
		}
		code, _, err := Get(insecure, cp.URL+"/readyz", cp.AdminToken)
		if err != nil {
			return false, err
		}
		return code == http.StatusOK, fmt.Errorf("/readyz: HTTP %d", code)
	})
	if err != nil {
		t.Fatal(err)
	}

	cfg := &rest.Config{Host: cp.URL, BearerToken: cp.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile}, QPS: 50, Burst: 100}
	cp.Admin, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// Kubeconfig writes a kubeconfig for the control plane with the given bearer token.
func (cp *ControlPlane) Kubeconfig(t *testing.T, path, token string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthority: cp.CAFile}
	cfg.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// Apply creates the RBAC manifest objects (the kinds deploy/rbac.yaml holds). kube-system
// appears shortly after the apiserver is ready, so NotFound is retried.
func (cp *ControlPlane) Apply(ctx context.Context, objs []runtime.Object) error {
	for _, obj := range objs {
		create := func() error {
			var err error
			c := metav1.CreateOptions{}
			switch o := obj.(type) {
			case *corev1.ServiceAccount:
				_, err = cp.Admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, c)
			case *rbacv1.ClusterRole:
				_, err = cp.Admin.RbacV1().ClusterRoles().Create(ctx, o, c)
			case *rbacv1.ClusterRoleBinding:
				_, err = cp.Admin.RbacV1().ClusterRoleBindings().Create(ctx, o, c)
			case *rbacv1.Role:
				_, err = cp.Admin.RbacV1().Roles(o.Namespace).Create(ctx, o, c)
			case *rbacv1.RoleBinding:
				_, err = cp.Admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, c)
			default:
				return fmt.Errorf("apply: unsupported kind %T", obj)
			}
			return err
		}
		var permanent error
		err := Poll(ctx, fmt.Sprintf("creating %T", obj), 200*time.Millisecond, 30*time.Second, func() (bool, error) {
			switch err := create(); {
			case err == nil, apierrors.IsAlreadyExists(err):
				return true, nil
			case apierrors.IsNotFound(err): // the namespace is not there yet
				return false, err
			default:
				permanent = err
				return true, nil
			}
		})
		if err == nil {
			err = permanent
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes a file readable by its owner only.
func WriteFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Get does an HTTP GET with a bearer token and returns the status and body.
func Get(c *http.Client, url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(body), err
}

// Sample is one Prometheus text-format sample.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// ParseMetrics parses Prometheus text exposition (enough of it for counters).
func ParseMetrics(text string) ([]Sample, error) {
	var out []Sample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("unparsable metrics line %q", line)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		s := Sample{Name: m[1], Labels: map[string]string{}, Value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.Labels[p[1]] = p[2]
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no metrics")
	}
	return out, nil
}

// Sum adds up the samples of a metric whose labels match all of match (a value "" in match
// means the label may have any value but must be present).
func Sum(samples []Sample, name string, match map[string]string) (total float64, n int) {
	for _, s := range samples {
		if s.Name != name {
			continue
		}
		ok := true
		for k, v := range match {
			got, has := s.Labels[k]
			ok = ok && has && (v == "" || got == v)
		}
		if ok {
			total += s.Value
			n++
		}
	}
	return total, n
}

// Kill ends the process's group at once with SIGKILL (kill -9: no shutdown
// code runs, as when a node dies) and waits, bounded, until it has exited.
func (p *Process) Kill(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit within 10s of SIGKILL", p.name)
	}
}

// Terminate sends SIGTERM to the process's group, as the kubelet does to a
// Pod's containers when it is deleted; it does not wait (see WaitExit).
func (p *Process) Terminate(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-p.pid, syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to %s: %v", p.name, err)
	}
}

// WaitExit waits up to timeout for the process to exit and returns how it
// exited (nil: status 0), or an error if it is still running.
func (p *Process) WaitExit(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("%s still running %v after the signal", p.name, timeout)
	}
}
