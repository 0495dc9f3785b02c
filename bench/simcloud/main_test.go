package simcloud

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testKey = "sup3r-s3cret-KEY-7f3a"

// startServer starts a server closed at the end of the test.
func startServer(t *testing.T, cfg ServerConfig) *Server {
	t.Helper()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// cloudFor builds a client the way the CCM does: through the registry and a
// YAML config. extra is appended to the config.
func cloudFor(t *testing.T, s *Server, extra string) *Cloud {
	t.Helper()
	if !strings.Contains(extra, "timeout:") {
		extra += "timeout: 5s\n"
	}
	cfg := fmt.Sprintf("endpoint: %s\napiKey: %s\nclusterName: kubernetes\n%s", s.URL(), testKey, extra)
	iface, err := cloudprovider.GetCloudProvider(ProviderName, strings.NewReader(cfg))
	if err != nil {
		t.Fatalf("GetCloudProvider: %v", err)
	}
	if iface == nil {
		t.Fatal("GetCloudProvider: provider simcloud is not registered")
	}
	c, ok := iface.(*Cloud)
	if !ok {
		t.Fatalf("GetCloudProvider returned %T, want *Cloud", iface)
	}
	t.Cleanup(c.Close)
	return c
}

func addInstances(t *testing.T, s *Server, n int, prefix string) []Instance {
	t.Helper()
	insts, err := s.AddInstances(n, prefix)
	if err != nil {
		t.Fatalf("AddInstances: %v", err)
	}
	return insts
}

func nodeByName(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func nodeByProviderID(name, providerID string) *v1.Node {
	n := nodeByName(name)
	n.Spec.ProviderID = providerID
	return n
}

func service(uid string, ports ...int32) *v1.Service {
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc-" + uid, Namespace: "default", UID: types.UID(uid)}}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Protocol: v1.ProtocolTCP, Port: p, NodePort: 30000 + p})
	}
	return svc
}

// apiError asserts err is an *APIError with the given status and code.
func apiError(t *testing.T, err error, status int, code string) *APIError {
	t.Helper()
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *APIError", err, err)
	}
	if ae.StatusCode != status || ae.Code != code {
		t.Fatalf("APIError %d %s, want %d %s (%v)", ae.StatusCode, ae.Code, status, code, err)
	}
	return ae
}

// waitFor polls cond every 5ms for at most 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func routeTo(node, cidr string) *cloudprovider.Route {
	return &cloudprovider.Route{TargetNode: types.NodeName(node), DestinationCIDR: cidr}
}
