//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// UninitializedTaint is the taint a kubelet with --cloud-provider=external puts
// on its Node until the cloud-node controller initialises it.
const UninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// UninitializedNode is a Node as such a kubelet registers it: no provider ID,
// the uninitialized taint.
func UninitializedNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		}},
	}
}

// SetNodeReady sets node name's Ready condition, as its kubelet would report it.
func (cp *ControlPlane) SetNodeReady(ctx context.Context, t *testing.T, name string, status corev1.ConditionStatus) {
	t.Helper()
	now := time.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":"E2E","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
		status, now, now)
	if _, err := cp.Admin.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("setting node %s Ready=%s: %v", name, status, err)
	}
}

// WaitServing polls the CCM p's /healthz on 127.0.0.1:port (its self-signed
// secure port) until it answers 200, and returns a client for that port and its
// base URL. It stops p and fails the test if p exits or timeout passes first.
func (p *Process) WaitServing(ctx context.Context, t *testing.T, port int, token string, timeout time.Duration) (*http.Client, string) {
	t.Helper()
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, // loopback, self-signed
	}}
	err := Poll(ctx, "CCM /healthz", 250*time.Millisecond, timeout, func() (bool, error) {
		if done, err := p.Exited(); done {
			return false, fmt.Errorf("cloud-controller-manager exited: %v", err)
		}
		code, body, err := Get(client, url+"/healthz", token)
		if err != nil {
			return false, err
		}
		return code == http.StatusOK, fmt.Errorf("/healthz: HTTP %d: %s", code, body)
	})
	if err != nil {
		p.Quit(t)
		t.Fatal(err)
	}
	return client, url
}

// BuildRace builds the package in the test's working directory with `go build -race -o out`
// in the background (while a control plane starts) and returns where its result arrives (a
// Build shares one binary among several tests). pkg names the package in messages. The build
// is killed, with its process group, when ctx ends or the test cleans up; cleanup waits for it.
func BuildRace(ctx context.Context, t *testing.T, goBin, out, pkg string, timeout time.Duration) <-chan error {
	return BuildRaceIn(ctx, t, goBin, "", out, ".", timeout)
}

// BuildRaceIn is BuildRace of pkg in dir, with more go build flags (-ldflags ...).
func BuildRaceIn(ctx context.Context, t *testing.T, goBin, dir, out, pkg string, timeout time.Duration, args ...string) <-chan error {
	t.Helper()
	built, done := make(chan error, 1), make(chan struct{})
	bctx, bcancel := context.WithTimeout(ctx, timeout)
	go func() {
		defer close(done)
		built <- goBuildRace(bctx, goBin, dir, out, pkg, args)
	}()
	t.Cleanup(func() { bcancel(); <-done }) // before the test's directories are removed
	return built
}
