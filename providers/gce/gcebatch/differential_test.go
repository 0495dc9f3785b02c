package gcebatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/limiter"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/gce/gcesim"
)

// start runs gcesim with a fleet and builds the adapter over the unmodified provider from
// its own cloud config (api-endpoint, token-url, project-id, local-zone, network).
func start(t *testing.T, cfg gcesim.Config, multizone bool) (*gcesim.Server, *Cloud) {
	t.Helper()
	sim, err := gcesim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sim.Close()
		if u := sim.Unknown(); len(u) > 0 {
			t.Errorf("gcesim got calls it does not simulate: %q", u)
		}
	})
	t.Setenv("GCE_METADATA_HOST", sim.MetadataHost()) // no metadata server: 404s
	conf := fmt.Sprintf("[global]\napi-endpoint = %s\ntoken-url = %s\nproject-id = %s\nlocal-zone = %s\nnetwork-name = default\nsubnetwork-name = default\nmultizone = %t\n",
		sim.APIEndpoint(), sim.TokenURL(), sim.Project(), sim.Zones()[0], multizone)
	c, err := New([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

func fleet(sim *gcesim.Server) {
	zs := sim.Zones()
	for i := 1; i <= 9; i++ {
		in := gcesim.Instance{Name: fmt.Sprintf("node-%d", i), Zone: zs[i%3], MachineType: "e2-standard-4",
			InternalIP: fmt.Sprintf("10.0.0.%d", i)}
		if i%2 == 0 {
			in.ExternalIP = fmt.Sprintf("34.0.0.%d", i)
		}
		if i == 5 {
			in.IPv6 = "fd20::5"
		}
		if i == 7 {
			in.Status = gcesim.StatusTerminated // stopped: still exists
		}
		sim.Put(in)
	}
}

func node(name, providerID string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeSpec{ProviderID: providerID}}
}

// nodes are every kind of Node the differential test asks about: with provider IDs (found,
// stopped, missing, a malformed ID) and without (found in the first or a later managed zone,
// a FQDN name, missing).
func nodes(sim *gcesim.Server) []*v1.Node {
	zs := sim.Zones()
	var out []*v1.Node
	for i := 1; i <= 9; i++ {
		out = append(out, node(fmt.Sprintf("node-%d", i), sim.ProviderID(zs[i%3], fmt.Sprintf("node-%d", i))))
		out = append(out, node(fmt.Sprintf("node-%d", i), ""))
	}
	return append(out,
		node("node-3.c.gcesim-project.internal", ""),
		node("gone", sim.ProviderID(zs[0], "gone")),
		node("gone", ""),
		node("bad", "gce://only-two/parts"),
		// Zones that do not exist: the provider's instances.get there is a 404, "does not
		// exist", as is the batch's list there.
		node("node-1", sim.ProviderID(sim.Region()+"-z", "node-1")),
		node("node-1", sim.ProviderID("nozone", "node-1")),
	)
}

// TestDifferential holds the adapter's batch answers equal to the unmodified provider's
// own InstanceMetadata / InstanceExists / InstanceShutdown for every Node, single- and
// multi-zone.
func TestDifferential(t *testing.T) {
	for _, multizone := range []bool{false, true} {
		t.Run(fmt.Sprintf("multizone=%t", multizone), func(t *testing.T) {
			sim, c := start(t, gcesim.Config{}, multizone)
			fleet(sim)
			// An instance without a network interface: the provider's InstanceMetadata fails
			// for it, its InstanceExists answers true.
			sim.Put(gcesim.Instance{Name: "nonic", Zone: sim.Zones()[0], MachineType: "e2-standard-4", NoNetworkInterface: true})
			ctx := context.Background()
			up, _ := c.Unwrap().InstancesV2()
			ns := append(nodes(sim), node("nonic", sim.ProviderID(sim.Zones()[0], "nonic")), node("nonic", ""))
			before := sim.Calls()["compute.instances.list"]
			got, err := c.BatchInstances().BatchInstanceStatus(ctx, ns)
			if err != nil {
				t.Fatal(err)
			}
			lists := sim.Calls()["compute.instances.list"] - before
			if lists > 5 {
				t.Errorf("one batch of %d nodes made %d instances.list calls, want at most one per zone (3 and 2 that do not exist)", len(ns), lists)
			}
			checked := 0
			for k, n := range ns {
				st := got[k]
				md, mErr := up.InstanceMetadata(ctx, n)
				ex, eErr := up.InstanceExists(ctx, n)
				sh, sErr := up.InstanceShutdown(ctx, n)
				what := fmt.Sprintf("node %s (providerID %q)", n.Name, n.Spec.ProviderID)
				stMdErr := st.Err // InstanceMetadata's error as cloudgate answers it (metadataOf)
				if stMdErr == nil {
					stMdErr = st.MetadataErr
				}
				if (mErr == nil) != (stMdErr == nil) {
					t.Errorf("%s: metadata error: provider %v, batch %v", what, mErr, stMdErr)
					continue
				}
				if mErr == nil && !reflect.DeepEqual(md, st.Metadata) {
					t.Errorf("%s: metadata: provider %+v, batch %+v", what, md, st.Metadata)
				}
				if errors.Is(mErr, cloudprovider.InstanceNotFound) && !errors.Is(st.Err, cloudprovider.InstanceNotFound) {
					t.Errorf("%s: the provider answers InstanceNotFound, the batch %v", what, st.Err)
				}
				// InstanceExists as cloudgate answers it from a batch status (existsOf).
				bex, bErr := !st.Deleted && st.Err == nil, error(nil)
				if st.Err != nil && !errors.Is(st.Err, cloudprovider.InstanceNotFound) {
					bErr = st.Err
				}
				if ex != bex || (eErr == nil) != (bErr == nil) {
					t.Errorf("%s: exists: provider %v, %v; batch %v, %v", what, ex, eErr, bex, bErr)
				}
				// The provider implements no InstanceShutdown; the lifecycle controller reads its
				// NotImplemented as "not shut down", which is the batch's answer.
				if sh || !errors.Is(sErr, cloudprovider.NotImplemented) || st.Shutdown {
					t.Errorf("%s: shutdown: provider %v, %v; batch %v", what, sh, sErr, st.Shutdown)
				}
				checked++
			}
			t.Logf("%d nodes checked field by field in one batch (%d instances.list calls); calls %v", checked, lists, sim.Calls())
		})
	}
}

// TestListMatchesProvider holds the list prefetch's records equal to the provider's answer by
// provider ID, over several aggregatedList pages.
func TestListMatchesProvider(t *testing.T) {
	sim, c := start(t, gcesim.Config{PageSize: 4}, true)
	fleet(sim)
	ctx := context.Background()
	up, _ := c.Unwrap().InstancesV2()
	var recs []provider.InstanceRecord
	token, pages := "", 0
	for {
		page, next, err := c.BatchInstances().ListInstances(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		recs, pages = append(recs, page...), pages+1
		if token = next; token == "" {
			break
		}
	}
	if len(recs) != 9 || pages != 3 {
		t.Fatalf("%d records in %d pages, want 9 in 3", len(recs), pages)
	}
	for _, r := range recs {
		md, err := up.InstanceMetadata(ctx, node(r.NodeName, r.Metadata.ProviderID))
		if err != nil || !reflect.DeepEqual(*md, r.Metadata) {
			t.Errorf("record %+v; provider %+v, %v", r.Metadata, md, err)
		}
	}
}

// TestFaithful: the provider's answers through cloudgate (no adapter, no batching) equal the
// provider's alone, errors included. The not-found guard is off: it holds a first "does not
// exist" back by design (checked below), which is the one answer it changes.
func TestFaithful(t *testing.T) {
	sim, c := start(t, gcesim.Config{}, true)
	fleet(sim)
	ctx := context.Background()
	up := c.Unwrap()
	cfg := provider.DefaultConfig()
	off := false
	cfg.NotFoundGuard.Enabled = &off
	gated, err := provider.New(up, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer gated.Close()
	guarded, err := provider.New(up, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Close()
	g, _ := guarded.InstancesV2()
	if ex, err := g.InstanceExists(ctx, node("gone", sim.ProviderID(sim.Zones()[0], "gone"))); err == nil {
		t.Errorf("default config: a first \"does not exist\" answered %v, nil; want it held by the not-found guard", ex)
	}
	a, _ := up.InstancesV2()
	b, _ := gated.InstancesV2()
	for _, n := range nodes(sim) {
		m1, e1 := a.InstanceMetadata(ctx, n)
		m2, e2 := b.InstanceMetadata(ctx, n)
		if !reflect.DeepEqual(m1, m2) || fmt.Sprint(e1) != fmt.Sprint(e2) || errors.Is(e1, cloudprovider.InstanceNotFound) != errors.Is(e2, cloudprovider.InstanceNotFound) {
			t.Errorf("%s: metadata provider %+v, %v; cloudgate %+v, %v", n.Name, m1, e1, m2, e2)
		}
		x1, e1 := a.InstanceExists(ctx, n)
		x2, e2 := b.InstanceExists(ctx, n)
		if x1 != x2 || fmt.Sprint(e1) != fmt.Sprint(e2) {
			t.Errorf("%s: exists provider %v, %v; cloudgate %v, %v", n.Name, x1, e1, x2, e2)
		}
		s1, e1 := a.InstanceShutdown(ctx, n)
		s2, e2 := b.InstanceShutdown(ctx, n)
		if s1 != s2 || e1 != e2 {
			t.Errorf("%s: shutdown provider %v, %v; cloudgate %v, %v", n.Name, s1, e1, s2, e2)
		}
	}
}

// TestThrottleAsProviderReturnsIt: a quota error as the GCE provider returns it — through
// instances.get (a *googleapi.Error), and formatted with %v by InstanceMetadata — is
// throttling for cloudgate's classifier, with and without the adapter's hook; a 404 is not,
// and the provider reports it as exists=false, which cloudgate's not-found guard sees.
func TestThrottleAsProviderReturnsIt(t *testing.T) {
	for _, s429 := range []bool{false, true} {
		sim, c := start(t, gcesim.Config{Quota: map[gcesim.Group]int{gcesim.GroupRead: 1}, Status429: s429}, false)
		fleet(sim)
		ctx := context.Background()
		up, _ := c.Unwrap().InstancesV2()
		n := node("node-3", sim.ProviderID(sim.Zones()[0], "node-3"))
		if _, err := up.InstanceMetadata(ctx, n); err != nil {
			t.Fatal(err)
		}
		_, mErr := up.InstanceMetadata(ctx, n) // the read quota (1/min) is spent
		_, eErr := up.InstanceExists(ctx, n)
		if sim.Throttled()["compute.instances.get"] != 2 {
			t.Fatalf("throttled %v, want 2 instances.get", sim.Throttled())
		}
		plain, err := limiter.NewThrottleClassifier(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, cl := range []*limiter.ThrottleClassifier{plain, plain.WithErrors(c)} {
			for _, e := range []error{mErr, eErr} {
				if th, _ := cl.Classify(e); !th {
					t.Errorf("429=%t: %v (%T) not classified as throttling", s429, e, e)
				}
			}
		}
		sim.Remove(sim.Zones()[0], "node-3")
		sim2, c2 := start(t, gcesim.Config{}, false)
		_ = sim2
		up2, _ := c2.Unwrap().InstancesV2()
		gone := node("gone", sim2.ProviderID(sim2.Zones()[0], "gone"))
		ex, err := up2.InstanceExists(ctx, gone)
		if ex || err != nil {
			t.Errorf("exists of a missing instance: %v, %v; want false, nil", ex, err)
		}
		_, mErr = up2.InstanceMetadata(ctx, gone)
		for _, cl := range []*limiter.ThrottleClassifier{plain, plain.WithErrors(c)} {
			if th, _ := cl.Classify(mErr); th {
				t.Errorf("a 404 (%v) classified as throttling", mErr)
			}
		}
		if _, err := up2.InstanceMetadata(ctx, node("gone", "")); err != cloudprovider.InstanceNotFound {
			t.Errorf("metadata of a missing instance by name: %v, want InstanceNotFound", err)
		}
	}
}

// noInit is the adapter without its provider's Initialize, which needs a kube client: what
// these tests read is the list prefetch cloudgate starts in its own Initialize.
type noInit struct{ cloudprovider.Interface }

func (noInit) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}

// listedThrough is cloudgate over the adapter after its first list: list prefetch on, every
// page answered at once (no token wait), the not-found guard off (it holds a first "does not
// exist" back by design), a fake clock (no second list, no answer expires).
func listedThrough(t *testing.T, c *Cloud) cloudprovider.InstancesV2 {
	t.Helper()
	cfg := provider.DefaultConfig()
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1e6, 1e6
	cfg.Batch.ListPrefetch = true
	off := false
	cfg.NotFoundGuard.Enabled = &off
	cfg.Clock = clocktesting.NewFakeClock(time.Unix(10000, 0))
	gated, err := provider.New(noInit{c}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		_ = gated.(interface{ Close() error }).Close()
	})
	gated.Initialize(nil, stop)
	v2, _ := gated.InstancesV2()
	return v2
}

// TestListedDuplicateNamesMatchProvider: instance names are unique per zone only. For a Node
// named like instances in several managed zones (one of them stopped), cloudgate over the
// adapter answers from its list exactly as the provider does by name — the first managed
// zone's instance — whatever order the list's pages give the zones in (managed zones in
// aggregatedList's order, and not), each record on a page of its own; and every instance by
// its provider ID. The list, not a per-node call, answers.
func TestListedDuplicateNamesMatchProvider(t *testing.T) {
	for _, order := range [][]string{
		{"us-central1-a", "us-central1-b", "us-central1-c"}, // the provider's zone order is the list's
		{"us-central1-c", "us-central1-a", "us-central1-b"}, // it is not
	} {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			sim, c := start(t, gcesim.Config{Zones: order, PageSize: 1}, true)
			var byID []*v1.Node // every instance by its provider ID
			put := func(name, zone, ip, status string) {
				sim.Put(gcesim.Instance{Name: name, Zone: zone, MachineType: "e2-" + zone[len(zone)-1:], InternalIP: ip, Status: status})
				byID = append(byID, node(name, sim.ProviderID(zone, name)))
			}
			put("dup", "us-central1-a", "10.0.1.1", "")
			put("dup", "us-central1-b", "10.0.1.2", "")
			put("dup", "us-central1-c", "10.0.1.3", "")
			put("ab", "us-central1-a", "10.0.2.1", gcesim.StatusTerminated)
			put("ab", "us-central1-b", "10.0.2.2", "")
			put("bc", "us-central1-b", "10.0.3.2", "")
			put("bc", "us-central1-c", "10.0.3.3", gcesim.StatusTerminated)
			put("solo", "us-central1-c", "10.0.4.3", "")
			ctx := context.Background()
			up, _ := c.Unwrap().InstancesV2()
			gated := listedThrough(t, c)
			ns := append([]*v1.Node{node("dup", ""), node("ab", ""), node("bc", ""), node("solo", "")}, byID...)
			ns = append(ns, node("none", "")) // last: the only one the list does not answer
			type answer struct {
				md     *cloudprovider.InstanceMetadata
				mdErr  error
				exists bool
				exErr  error
			}
			ask := func(v2 cloudprovider.InstancesV2, n *v1.Node) (a answer) {
				a.md, a.mdErr = v2.InstanceMetadata(ctx, n)
				a.exists, a.exErr = v2.InstanceExists(ctx, n)
				return a
			}
			got := make([]answer, len(ns))
			var listed map[string]int // calls once every listed Node was answered
			for k, n := range ns {
				if k == len(ns)-1 {
					listed = sim.Calls()
				}
				got[k] = ask(gated, n)
			}
			if listed["compute.instances.aggregatedList"] != 8 {
				t.Errorf("%d aggregatedList pages, want 8 (one record each)", listed["compute.instances.aggregatedList"])
			}
			if n := listed["compute.instances.get"] + listed["compute.instances.list"]; n != 0 {
				t.Errorf("cloudgate made %d instances.get/list calls for listed instances, want every answer from the list", n)
			}
			for k, n := range ns {
				want := ask(up, n)
				what := fmt.Sprintf("node %s (providerID %q)", n.Name, n.Spec.ProviderID)
				if !reflect.DeepEqual(want.md, got[k].md) || (want.mdErr == nil) != (got[k].mdErr == nil) {
					t.Errorf("%s: metadata: provider %+v, %v; cloudgate over the list %+v, %v", what, want.md, want.mdErr, got[k].md, got[k].mdErr)
				}
				if want.exists != got[k].exists || want.exErr != got[k].exErr {
					t.Errorf("%s: exists: provider %v, %v; cloudgate over the list %v, %v", what, want.exists, want.exErr, got[k].exists, got[k].exErr)
				}
			}
		})
	}
}
