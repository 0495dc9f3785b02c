package ccm

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// readyCloud is a cloud whose readiness a test sets.
type readyCloud struct {
	cloudprovider.Interface
	mu  sync.Mutex
	err error
}

func (r *readyCloud) Ready(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *readyCloud) set(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
}

// TestReadyz: --readyz-bind-address serves /readyz on its own listener, plain HTTP: 200
// "ok" while the cloud (found inside the leader-election gate, as the CCM wraps it) is
// ready, 503 with its reason while it is not, 200 again after; a cloud without a
// readiness check is ready. The flag is registered on the command, empty by default.
func TestReadyz(t *testing.T) {
	cloud := &readyCloud{Interface: &fake.Cloud{}}
	addr, err := listenReadyz("127.0.0.1:0", &gatedCloud{Interface: cloud})
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr.String() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusOK || body != "ok\n" {
		t.Errorf("ready: %d %q, want 200 ok", code, body)
	}
	cloud.set(errors.New("limits.shared.failureMode is closed and Redis at r:6379: connection refused"))
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "failureMode is closed and Redis at r:6379") {
		t.Errorf("not ready: %d %q, want 503 with the reason", code, body)
	}
	cloud.set(nil)
	if code, _ := get(); code != http.StatusOK {
		t.Errorf("ready again: %d, want 200", code)
	}

	plain, err := listenReadyz("127.0.0.1:0", &fake.Cloud{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + plain.String() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a cloud without a readiness check: %d, want 200", resp.StatusCode)
	}

	stop := make(chan struct{})
	defer close(stop)
	cmd, err := New(stop, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := cmd.Flags().Lookup("readyz-bind-address"); f == nil || f.DefValue != "" {
		t.Errorf("--readyz-bind-address: %v, want a flag, empty by default", f)
	}
}
