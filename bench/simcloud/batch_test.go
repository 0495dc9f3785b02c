package simcloud

import (
	"context"
	"net/http"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/cloudgate/cloudgate/provider"
)

func batcher(t *testing.T, c *Cloud) (provider.BatchInstances, provider.InstanceLister) {
	t.Helper()
	v2, ok := c.InstancesV2()
	if !ok {
		t.Fatal("InstancesV2 not supported")
	}
	b, ok := v2.(provider.BatchInstances)
	if !ok {
		t.Fatalf("%T does not implement provider.BatchInstances", v2)
	}
	l, ok := v2.(provider.InstanceLister)
	if !ok {
		t.Fatalf("%T does not implement provider.InstanceLister", v2)
	}
	return b, l
}

func TestBatchMixedExistingAndMissingNodes(t *testing.T) {
	s := startServer(t, ServerConfig{ReadQPS: negligibleQPS, ReadBurst: 2})
	insts := addInstances(t, s, 4, "node")
	if !s.SetShutdown(insts[2].ID, true) {
		t.Fatal("SetShutdown: instance missing")
	}
	c := cloudFor(t, s, "")
	b, _ := batcher(t, c)
	if b.MaxBatchSize() != DefaultMaxBatchSize {
		t.Fatalf("MaxBatchSize() = %d", b.MaxBatchSize())
	}

	wrongZone := insts[1]
	wrongZone.Zone = "zone-x"
	nodes := []*v1.Node{
		nodeByProviderID(insts[0].NodeName, insts[0].ProviderID()), // 0: by ID
		nodeByName("ghost-1"),                                          // 1: missing by name
		nodeByName(insts[2].NodeName),                                  // 2: by name, shut down
		nodeByProviderID("ghost-2", "simcloud://zone-a/i-ghost"),       // 3: missing by ID
		nodeByProviderID(insts[1].NodeName, wrongZone.ProviderID()),    // 4: ID in another zone
		nodeByProviderID("bad", "aws:///us-east-1a/i-1"),               // 5: not ours: own error, not sent
		nodeByProviderID(insts[3].NodeName, "simcloud://"+insts[3].ID), // 6: zone-less form
	}
	res, err := b.BatchInstanceStatus(context.Background(), nodes)
	if err != nil {
		t.Fatalf("BatchInstanceStatus: %v", err)
	}
	if len(res) != len(nodes) {
		t.Fatalf("%d results for %d nodes", len(res), len(nodes))
	}
	for _, i := range []int{1, 3, 4} {
		if res[i].Err != cloudprovider.InstanceNotFound || res[i].Metadata != nil {
			t.Errorf("result %d = %+v, want exactly cloudprovider.InstanceNotFound", i, res[i])
		}
	}
	if res[5].Err == nil || res[5].Err == cloudprovider.InstanceNotFound {
		t.Errorf("result 5 err = %v, want a provider-ID error that is not InstanceNotFound", res[5].Err)
	}
	for _, tc := range []struct {
		i        int
		inst     Instance
		shutdown bool
	}{{0, insts[0], false}, {2, insts[2], true}, {6, insts[3], false}} {
		r := res[tc.i]
		if r.Err != nil || r.Metadata == nil {
			t.Fatalf("result %d = %+v, want metadata", tc.i, r)
		}
		if r.Metadata.ProviderID != tc.inst.ProviderID() || r.Metadata.Zone != tc.inst.Zone ||
			r.Metadata.InstanceType != tc.inst.Type || len(r.Metadata.NodeAddresses) != 2 || r.Shutdown != tc.shutdown {
			t.Errorf("result %d = %+v (shutdown %v), want %+v", tc.i, r.Metadata, r.Shutdown, tc.inst)
		}
	}

	cnt := s.Counters()
	if cnt.Calls[MethodBatchGetInstances] != 1 || cnt.TotalCalls() != 1 || cnt.BatchItems != 6 {
		t.Fatalf("counters %+v, want one BatchGetInstances call of 6 items", cnt)
	}
	// One token per batch: the bucket of 2 has exactly one left.
	cl, _ := c.Clusters()
	if _, err := cl.ListClusters(context.Background()); err != nil {
		t.Fatalf("second read: %v", err)
	}
	_, err = cl.ListClusters(context.Background())
	apiError(t, err, http.StatusTooManyRequests, CodeTooManyRequests)
}

func TestBatchOverMaxBatchSizeFails(t *testing.T) {
	s := startServer(t, ServerConfig{MaxBatchSize: 4})
	insts := addInstances(t, s, 5, "node")
	c := cloudFor(t, s, "maxBatchSize: 4\n")
	b, _ := batcher(t, c)
	var nodes []*v1.Node
	for _, in := range insts {
		nodes = append(nodes, nodeByName(in.NodeName))
	}
	if _, err := b.BatchInstanceStatus(context.Background(), nodes[:4]); err != nil {
		t.Fatalf("batch of 4: %v", err)
	}
	res, err := b.BatchInstanceStatus(context.Background(), nodes)
	if res != nil {
		t.Fatalf("batch of 5 answered %v", res)
	}
	ae := apiError(t, err, http.StatusBadRequest, CodeBadRequest)
	if !strings.Contains(ae.Message, "MaxBatchSize") {
		t.Fatalf("message %q does not name MaxBatchSize", ae.Message)
	}
	cnt := s.Counters()
	if cnt.Calls[MethodBatchGetInstances] != 2 || cnt.ClientErrors[MethodBatchGetInstances] != 1 || cnt.BatchItems != 4 {
		t.Fatalf("counters %+v", cnt)
	}
}

func TestBatchWithNothingToSendMakesNoCall(t *testing.T) {
	s := startServer(t, ServerConfig{})
	c := cloudFor(t, s, "")
	b, _ := batcher(t, c)
	res, err := b.BatchInstanceStatus(context.Background(), []*v1.Node{nil})
	if err != nil || len(res) != 1 || res[0].Err == nil {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	if n := s.Counters().TotalCalls(); n != 0 {
		t.Fatalf("%d calls, want 0", n)
	}
}

// listAll pages through ListInstances with a bounded loop.
func listAll(t *testing.T, l provider.InstanceLister, between func(page int)) ([]provider.InstanceRecord, int) {
	t.Helper()
	var all []provider.InstanceRecord
	token := ""
	for page := 1; page <= 10000; page++ {
		recs, next, err := l.ListInstances(context.Background(), token)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		all = append(all, recs...)
		if next == "" {
			return all, page
		}
		if between != nil {
			between(page)
		}
		token = next
	}
	t.Fatal("pagination did not end")
	return nil, 0
}

func TestListPaginationReturnsEveryInstanceOnce(t *testing.T) {
	s := startServer(t, ServerConfig{ListPageSize: 100})
	insts := addInstances(t, s, 1234, "node")

	for _, tc := range []struct {
		extra     string
		wantPages int
	}{{"", 13}, {"listPageSize: 50\n", 25}, {"listPageSize: 1000\n", 13}} {
		s.ResetCounters()
		c := cloudFor(t, s, tc.extra)
		_, l := batcher(t, c)
		all, pages := listAll(t, l, nil)
		if pages != tc.wantPages || len(all) != len(insts) {
			t.Fatalf("%q: %d pages, %d records; want %d pages, %d records", tc.extra, pages, len(all), tc.wantPages, len(insts))
		}
		seen := map[string]bool{}
		for i, r := range all {
			if seen[r.Metadata.ProviderID] {
				t.Fatalf("%s listed twice", r.Metadata.ProviderID)
			}
			seen[r.Metadata.ProviderID] = true
			// Listed in ID order, which AddInstances' numbering matches.
			if r.NodeName != insts[i].NodeName || r.Metadata.ProviderID != insts[i].ProviderID() || r.Metadata.Region != "region-1" {
				t.Fatalf("record %d = %+v, want %+v", i, r, insts[i])
			}
		}
		cnt := s.Counters()
		if cnt.Calls[MethodListInstances] != int64(pages) || cnt.ListedInstances != int64(len(insts)) {
			t.Fatalf("counters %+v", cnt)
		}
	}
}

func TestListPaginationUnderChurn(t *testing.T) {
	s := startServer(t, ServerConfig{ListPageSize: 10})
	insts := addInstances(t, s, 95, "node")
	c := cloudFor(t, s, "")
	_, l := batcher(t, c)
	deleted := map[string]bool{}
	all, _ := listAll(t, l, func(page int) {
		// Delete one instance already listed and one not yet listed, add one.
		for _, i := range []int{page*10 - 5, page*10 + 5} {
			if i < len(insts) && s.DeleteInstance(insts[i].ID) {
				deleted[insts[i].NodeName] = true
			}
		}
		addInstances(t, s, 1, "late")
	})
	seen := map[string]int{}
	for _, r := range all {
		seen[r.NodeName]++
	}
	for _, in := range insts {
		if deleted[in.NodeName] {
			continue
		}
		if seen[in.NodeName] != 1 {
			t.Fatalf("%s listed %d times, want 1", in.NodeName, seen[in.NodeName])
		}
	}
	for name, n := range seen {
		if n != 1 {
			t.Fatalf("%s listed %d times", name, n)
		}
	}
}
