package simcloud

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestServerConfigValidationNamesTheField(t *testing.T) {
	for field, cfg := range map[string]ServerConfig{
		"Addr":         {Addr: "0.0.0.0:0"},
		"ReadQPS":      {ReadQPS: -1},
		"ReadBurst":    {ReadBurst: -1},
		"WriteQPS":     {WriteQPS: -2},
		"WriteBurst":   {WriteBurst: -3},
		"BaseLatency":  {BaseLatency: -1},
		"Jitter":       {Jitter: -1},
		"MaxBatchSize": {MaxBatchSize: -1},
		"ListPageSize": {ListPageSize: -1},
		"HangTimeout":  {HangTimeout: -1},
		"Zones[1]":     {Zones: []string{"a", "b/c"}},
		"Clusters[0]":  {Clusters: []string{"bad name"}},
		"ErrorRate":    {Faults: Faults{ErrorRate: 2}},
	} {
		s, err := NewServer(cfg)
		if err == nil {
			s.Close()
			t.Errorf("%s: accepted %+v", field, cfg)
			continue
		}
		if !strings.Contains(err.Error(), field) {
			t.Errorf("%s: error %q does not name the field", field, err)
		}
	}
}

func TestServerDefaults(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: 2.5})
	cfg := s.Config()
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || cfg.MaxBatchSize != 500 || cfg.ListPageSize != 500 ||
		cfg.ReadBurst != 3 || cfg.WriteBurst != 0 || cfg.HangTimeout != DefaultHangTimeout || cfg.Region != "region-1" ||
		len(cfg.Zones) != 3 || len(cfg.Clusters) != 1 {
		t.Fatalf("URL %s, config %+v", s.URL(), cfg)
	}
}

func TestAdminAPI(t *testing.T) {
	s := startServer(t, ServerConfig{Zones: []string{"z1", "z2"}, Region: "r"})
	first := addInstances(t, s, 3, "pool")
	more := addInstances(t, s, 2, "pool") // numbering continues
	if more[0].NodeName != "pool-00003" || more[0].ID != "i-pool-00003" || more[1].Zone != "z1" || more[0].Region != "r" {
		t.Fatalf("continued instances %+v", more)
	}
	if first[0].Addresses[0].Address != "10.0.0.1" || more[1].Addresses[0].Address != "10.0.0.5" {
		t.Fatalf("addresses %v %v", first[0].Addresses, more[1].Addresses)
	}
	if first[2].Type != "sim-standard-4" || first[2].ProviderID() != "simcloud://z1/i-pool-00002" {
		t.Fatalf("instance %+v %s", first[2], first[2].ProviderID())
	}
	err := s.AddInstance(Instance{ID: "i-x", NodeName: "pool-00000", Zone: "z1"})
	if err == nil || !strings.Contains(err.Error(), "pool-00000") {
		t.Fatalf("duplicate node name: %v", err)
	}
	for _, bad := range []Instance{
		{ID: "", NodeName: "n", Zone: "z"},
		{ID: "a/b", NodeName: "n", Zone: "z"},
		{ID: "i-1", NodeName: "", Zone: "z"},
		{ID: "i-1", NodeName: "n", Zone: ""},
		{ID: "i-pool-00001", NodeName: "n", Zone: "z"},
	} {
		if err := s.AddInstance(bad); err == nil {
			t.Errorf("AddInstance(%+v) accepted", bad)
		}
	}
	if _, err := s.AddInstances(-1, "p"); err == nil {
		t.Error("AddInstances(-1) accepted")
	}
	if _, err := s.AddInstances(1, "bad/prefix"); err == nil {
		t.Error("AddInstances with a bad prefix accepted")
	}
	custom := Instance{ID: "vm-1", NodeName: "custom", Zone: "z9", Type: "big",
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.9.9.9"}}}
	if err := s.AddInstance(custom); err != nil {
		t.Fatal(err)
	}
	custom.Addresses[0].Address = "mutated"
	got, ok := s.Instance("vm-1")
	if !ok || got.Region != "r" || got.Addresses[0].Address != "10.9.9.9" {
		t.Fatalf("Instance(vm-1) = %+v, %v", got, ok)
	}
	if got, ok := s.InstanceByNodeName("custom"); !ok || got.ID != "vm-1" {
		t.Fatalf("InstanceByNodeName = %+v, %v", got, ok)
	}
	if n := len(s.Instances()); n != 6 {
		t.Fatalf("%d instances", n)
	}
	if !s.DeleteInstance("vm-1") || s.DeleteInstance("vm-1") || s.SetShutdown("vm-1", true) {
		t.Fatal("DeleteInstance/SetShutdown of a deleted instance")
	}
	if _, ok := s.Instance("vm-1"); ok {
		t.Fatal("deleted instance still there")
	}
	if zone, id, err := ParseProviderID("simcloud://z1/i-1"); err != nil || zone != "z1" || id != "i-1" {
		t.Fatalf("ParseProviderID = %q %q %v", zone, id, err)
	}
	for _, bad := range []string{"", "simcloud://", "simcloud://z/", "aws:///z/i-1", "simcloud://z/a/b"} {
		if _, _, err := ParseProviderID(bad); err == nil {
			t.Errorf("ParseProviderID(%q) accepted", bad)
		}
	}
}

// raw makes an HTTP call without the client.
func raw(t *testing.T, s *Server, method, path, auth, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("X-Request-Id", "req-42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRawHTTP(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	s := startServer(t, ServerConfig{MaxBatchSize: 2})
	addInstances(t, s, 1, "node")
	const auth = "Bearer any"
	for _, tc := range []struct {
		method, path, auth, body string
		status                   int
		contains                 string
	}{
		{"GET", "/v1/clusters", "", "", 401, CodeUnauthorized},
		{"GET", "/v1/clusters", "Basic x", "", 401, CodeUnauthorized},
		{"GET", "/v1/clusters", auth, "", 200, `"kubernetes"`},
		{"GET", "/v1/instances/i-node-00000", auth, "", 200, `"providerID":"simcloud://zone-a/i-node-00000"`},
		{"GET", "/v1/instances/nope", auth, "", 404, CodeInstanceNotFound},
		{"GET", "/v1/instances?name=node-00000", auth, "", 200, `"id":"i-node-00000"`},
		{"GET", "/v1/instances?name=", auth, "", 400, CodeBadRequest},
		{"GET", "/v1/instances?pageToken=!!", auth, "", 400, "pageToken"},
		{"GET", "/v1/instances?pageSize=x", auth, "", 400, "pageSize"},
		{"POST", "/v1/instances:batchGet", auth, `{"ids":["a","b"],"names":["c"]}`, 400, "MaxBatchSize 2"},
		{"POST", "/v1/instances:batchGet", auth, `{"ids":["i-node-00000"],"names":["x"]}`, 200, `"byName":[{"found":false}]`},
		{"POST", "/v1/instances:batchGet", auth, `{"idz":[]}`, 400, "unknown field"},
		{"PUT", "/v1/loadbalancers/lb1", auth, `{"cluster":"c","hosts":["b","a","a"]}`, 200, `"hosts":["a","b"]`},
		{"PUT", "/v1/loadbalancers/lb2", auth, `{"cluster":"c","hosts":[],"ports":[{"protocol":"TCP","port":0}]}`, 400, "port"},
		{"DELETE", "/v1/loadbalancers/lb1", auth, "", 200, `"existed":true`},
		{"POST", "/v1/clusters/c/routes", auth, `{"name":"r1","targetNode":"","destinationCIDR":"10.0.0.0/24"}`, 400, "targetNode"},
		{"PATCH", "/v1/clusters", auth, "", 405, ""},
	} {
		resp, body := raw(t, s, tc.method, tc.path, tc.auth, tc.body)
		if resp.StatusCode != tc.status || !strings.Contains(body, tc.contains) {
			t.Errorf("%s %s: %d %s; want %d containing %q", tc.method, tc.path, resp.StatusCode, body, tc.status, tc.contains)
		}
		if tc.status != 405 && resp.Header.Get("X-Request-Id") != "req-42" {
			t.Errorf("%s %s: request ID not echoed", tc.method, tc.path)
		}
	}
	log := s.WriteLog()
	if len(log) != 2 || log[0].RequestID != "req-42" {
		t.Fatalf("write log %+v", log)
	}
	cnt := s.Counters()
	if cnt.ClientErrors[MethodListClusters] != 2 || cnt.ClientErrors[MethodBatchGetInstances] != 2 || cnt.BatchItems != 2 {
		t.Fatalf("counters %+v", cnt)
	}
}

func TestConcurrentCallsAreCountedExactly(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 100, WriteQPS: negligibleQPS, WriteBurst: 20})
	insts := addInstances(t, s, 50, "node")
	c := cloudFor(t, s, "")
	v2, _ := c.InstancesV2()
	lb, _ := c.LoadBalancer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	readOK, writeOK := 0, 0
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				in := insts[(g*10+i)%len(insts)]
				if _, err := v2.InstanceMetadata(ctx, nodeByName(in.NodeName)); err == nil {
					mu.Lock()
					readOK++
					mu.Unlock()
				}
			}
			for i := range 3 {
				svc := service("svc-"+string(rune('a'+g))+"-"+string(rune('0'+i)), 80)
				if _, err := lb.EnsureLoadBalancer(ctx, "", svc, nil); err == nil {
					mu.Lock()
					writeOK++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	cnt := s.Counters()
	if readOK != 100 || writeOK != 20 || cnt.ReadCalls != 160 || cnt.ReadThrottled != 60 ||
		cnt.WriteCalls != 48 || cnt.WriteThrottled != 28 || len(s.WriteLog()) != 20 || len(s.LoadBalancers()) != 20 {
		t.Fatalf("readOK=%d writeOK=%d counters %+v", readOK, writeOK, cnt)
	}
}
