//go:build linux

package main

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
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// This file is the e2e test's harness: child processes in their own process groups, a real
// etcd + kube-apiserver on loopback ports, kubeconfigs and a Prometheus text scraper.

// process is a child process whose whole process group is ended at test cleanup.
type process struct {
	pid  int
	name string
	log  string // path of its combined stdout and stderr
	done chan struct{}
	err  error // valid after done is closed
}

// startProcess runs bin in its own process group, logging to dir/name.log. Cleanup sends
// SIGTERM to the group, then SIGKILL after 10 s; on failure it prints the log's tail.
// Pdeathsig kills the child should the test binary itself die.
func startProcess(t *testing.T, dir, name, bin string, args ...string) *process {
	t.Helper()
	p := &process{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	out, err := os.Create(p.log)
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
			t.Logf("--- last lines of %s ---\n%s", p.log, tail(p.log, 25))
		}
	})
	return p
}

// quit asks a Go child for a goroutine dump (SIGQUIT makes the runtime print every stack
// and exit) and logs the stacks that mention a goroutine's main or cloudgate code: for a
// process that is up but not answering.
func (p *process) quit(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(p.pid, syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
	data, err := os.ReadFile(p.log)
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

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
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

// grepLines returns the lines of a file matching re.
func grepLines(t *testing.T, path string, re *regexp.Regexp) []string {
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

// freePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// poll calls cond every interval until it returns true or an error, or timeout passes; it
// returns the last error seen (or a timeout error naming what).
func poll(ctx context.Context, what string, interval, timeout time.Duration, cond func() (bool, error)) error {
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

func randomToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// ccmUser is the identity the CCM runs as: deploy/rbac.yaml's ServiceAccount. A static token
// for it in --token-auth-file lets the test run the CCM with exactly that RBAC.
const ccmUser = "system:serviceaccount:kube-system:cloud-controller-manager"

// controlPlane is a running etcd + kube-apiserver.
type controlPlane struct {
	url        string // https://127.0.0.1:PORT
	caFile     string // the apiserver's self-signed certificate
	adminToken string // system:masters
	ccmToken   string // ccmUser
	admin      *kubernetes.Clientset
	apiserver  *process
}

// startControlPlane starts etcd and kube-apiserver (binaries from CLOUDGATE_ETCD and
// CLOUDGATE_KUBE_APISERVER) on free loopback ports and waits for /readyz. Flags follow
// shared/README.md's recipe.
func startControlPlane(ctx context.Context, t *testing.T, dir, etcdBin, apiserverBin string) *controlPlane {
	t.Helper()
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	startProcess(t, dir, "etcd", etcdBin,
		"--name=e2e", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL,
		"--unsafe-no-fsync", // a throw-away store: skip the disk flushes
	)

	cp := &controlPlane{adminToken: randomToken(t), ccmToken: randomToken(t)}
	tokens := filepath.Join(dir, "tokens.csv")
	writeFile(t, tokens, fmt.Sprintf("%s,admin,admin-uid,\"system:masters\"\n%s,%s,ccm-uid,\"system:serviceaccounts,system:serviceaccounts:kube-system\"\n",
		cp.adminToken, cp.ccmToken, ccmUser))
	saKey := filepath.Join(dir, "sa.key")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, saKey, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})))

	port := freePort(t)
	cp.url = fmt.Sprintf("https://127.0.0.1:%d", port)
	certDir := filepath.Join(dir, "apiserver-certs")
	cp.caFile = filepath.Join(certDir, "apiserver.crt")
	cp.apiserver = startProcess(t, dir, "kube-apiserver", apiserverBin,
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", // needed with a loopback advertise address
		"--secure-port="+strconv.Itoa(port), "--cert-dir="+certDir,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--service-account-issuer="+cp.url,
		"--service-account-key-file="+saKey, "--service-account-signing-key-file="+saKey,
		"--authorization-mode=RBAC", "--token-auth-file="+tokens,
	)

	// /readyz over TLS that is not verified yet: the certificate is written at start-up.
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // loopback, self-signed
	}}
	err = poll(ctx, "kube-apiserver /readyz", 250*time.Millisecond, time.Minute, func() (bool, error) {
		if done, err := cp.apiserver.exited(); done {
			return false, fmt.Errorf("kube-apiserver exited: %v", err)
		}
		code, _, err := get(insecure, cp.url+"/readyz", cp.adminToken)
		if err != nil {
			return false, err
		}
		return code == http.StatusOK, fmt.Errorf("/readyz: HTTP %d", code)
	})
	if err != nil {
		t.Fatal(err)
	}

	cfg := &rest.Config{Host: cp.url, BearerToken: cp.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: cp.caFile}, QPS: 50, Burst: 100}
	cp.admin, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// kubeconfig writes a kubeconfig for the control plane with the given bearer token.
func (cp *controlPlane) kubeconfig(t *testing.T, path, token string) {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: cp.url, CertificateAuthority: cp.caFile}
	cfg.AuthInfos["e2e"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
}

// apply creates the RBAC manifest objects (the kinds deploy/rbac.yaml holds). kube-system
// appears shortly after the apiserver is ready, so NotFound is retried.
func (cp *controlPlane) apply(ctx context.Context, objs []runtime.Object) error {
	for _, obj := range objs {
		create := func() error {
			var err error
			c := metav1.CreateOptions{}
			switch o := obj.(type) {
			case *corev1.ServiceAccount:
				_, err = cp.admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, c)
			case *rbacv1.ClusterRole:
				_, err = cp.admin.RbacV1().ClusterRoles().Create(ctx, o, c)
			case *rbacv1.ClusterRoleBinding:
				_, err = cp.admin.RbacV1().ClusterRoleBindings().Create(ctx, o, c)
			case *rbacv1.Role:
				_, err = cp.admin.RbacV1().Roles(o.Namespace).Create(ctx, o, c)
			case *rbacv1.RoleBinding:
				_, err = cp.admin.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, c)
			default:
				return fmt.Errorf("apply: unsupported kind %T", obj)
			}
			return err
		}
		var permanent error
		err := poll(ctx, fmt.Sprintf("creating %T", obj), 200*time.Millisecond, 30*time.Second, func() (bool, error) {
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

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// get does an HTTP GET with a bearer token and returns the status and body.
func get(c *http.Client, url, token string) (int, string, error) {
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

// sample is one Prometheus text-format sample.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)`)
	labelPair  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseMetrics parses Prometheus text exposition (enough of it for counters).
func parseMetrics(text string) ([]sample, error) {
	var out []sample
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
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[p[1]] = p[2]
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, errors.New("no metrics")
	}
	return out, nil
}

// sum adds up the samples of a metric whose labels match all of match (a value "" in match
// means the label may have any value but must be present).
func sum(samples []sample, name string, match map[string]string) (total float64, n int) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range match {
			got, has := s.labels[k]
			ok = ok && has && (v == "" || got == v)
		}
		if ok {
			total += s.value
			n++
		}
	}
	return total, n
}
