package dashboards_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
)

func init() {
	mustBePositive["Shadow: live vs would-be upstream calls"] = "the shadow load sends calls upstream"
	mustBePositive["Shadow: divergences by method"] = "the shadow load shuts instances down between cached reads"
	mustBePositive["Shadow: would-be breaker"] = "the shadow load's outage opens the would-be read breaker"
	mustBePositive["Shadow: would-be token wait"] = "the shadow load reads faster than its shadow bucket (2/s, burst 1)"
}

// shadowCloud is a second cloudgate, in mode: shadow, in front of a
// simcloud of its own (so the main load's figures do not change) with the
// same provider label. Its own metrics set (two Recorders of one label
// would share gauges); only its cloudgate_shadow_* families are served.
type shadowCloud struct {
	cloud cloudprovider.Interface
	srv   *simcloud.Server
	insts []simcloud.Instance
	reg   *prometheus.Registry
}

func newShadowCloud(t *testing.T) *shadowCloud {
	t.Helper()
	srv, err := simcloud.NewServer(simcloud.ServerConfig{Seed: 6, ReadQPS: 1000, ReadBurst: 200, BaseLatency: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	insts, err := srv.AddInstances(60, "shadow")
	if err != nil {
		t.Fatal(err)
	}
	client, err := simcloud.NewClient(simcloud.ClientConfig{Endpoint: srv.URL(), APIKey: "e2e-shadow", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	m := metrics.New()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	cfg := provider.DefaultConfig()
	cfg.Mode = provider.ModeShadow
	cfg.Metrics = m
	cfg.Limits.Read = provider.BucketConfig{QPS: 2, Burst: 1} // would-be waits
	cfg.Breaker.MinRequests = 5
	cfg.Breaker.Interval = provider.Duration{Duration: 2 * time.Second}
	cfg.Breaker.OpenTimeout = provider.Duration{Duration: 2 * time.Second}
	cfg.Breaker.HalfOpenRequests = 1
	cloud, err := provider.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &shadowCloud{cloud: cloud, srv: srv, insts: insts, reg: reg}
}

// gatherer serves the shadow families only.
func (s *shadowCloud) gatherer() prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := s.reg.Gather()
		var out []*dto.MetricFamily
		for _, mf := range mfs {
			if strings.HasPrefix(mf.GetName(), "cloudgate_shadow_") {
				out = append(out, mf)
			}
		}
		return out, err
	})
}

// run drives the shadow panels in waves a scrape or more apart: cold reads
// (would-be batches), warm re-reads (would-be hits), instances shut down
// between re-reads (divergences), then an outage (the would-be breaker
// opens) and recovery.
func (s *shadowCloud) run(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	iv2, _ := s.cloud.InstancesV2()
	nodes := make([]*v1.Node, len(s.insts))
	for i, in := range s.insts {
		nodes[i] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.NodeName}, Spec: v1.NodeSpec{ProviderID: in.ProviderID()}}
	}
	read := func() {
		done := make(chan struct{}, len(nodes))
		for _, n := range nodes {
			go func() {
				defer func() { done <- struct{}{} }()
				_, _ = iv2.InstanceShutdown(ctx, n)
				_, _ = iv2.InstanceMetadata(ctx, n)
			}()
		}
		for range nodes {
			<-done
		}
	}
	for wave := range 4 {
		if wave >= 2 {
			for _, in := range s.insts[(wave-2)*10 : (wave-1)*10] {
				s.srv.SetShutdown(in.ID, true)
			}
		}
		read()
		time.Sleep(1200 * time.Millisecond)
	}
	if err := s.srv.SetFaults(simcloud.Faults{Outage: true}); err != nil {
		t.Fatal(err)
	}
	lb, _ := s.cloud.LoadBalancer()
	start := time.Now()
	for i := 0; time.Since(start) < 4*time.Second; i++ {
		_, _, _ = lb.GetLoadBalancer(ctx, "kubernetes", &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "shadow", Namespace: "default", UID: "shadow-uid"}})
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.srv.SetFaults(simcloud.Faults{}); err != nil {
		t.Fatal(err)
	}
	read()
	time.Sleep(1200 * time.Millisecond)
}
