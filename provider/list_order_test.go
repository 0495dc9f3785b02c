package provider

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
)

// pagesCloud lists pages, in order; every page after the first waits for
// release, so a test can look at the caches between two pages.
type pagesCloud struct {
	*batchCloud
	pages   [][]InstanceRecord
	release chan struct{}
}

func (l *pagesCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return l, true }

func (l *pagesCloud) ListInstances(ctx context.Context, token string) ([]InstanceRecord, string, error) {
	i := 0
	if token != "" {
		fmt.Sscan(token, &i)
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	next := ""
	if i+1 < len(l.pages) {
		next = fmt.Sprint(i + 1)
	}
	return l.pages[i], next, nil
}

// listRig starts a gate over pages with list prefetch and waits until the
// first page is in (the second, if any, is waiting for release).
func listRig(t *testing.T, pages ...[]InstanceRecord) (*pagesCloud, cloudprovider.Interface, *enforcer) {
	up := &pagesCloud{batchCloud: &batchCloud{Cloud: &fake.Cloud{Provider: "fake"}, missing: map[string]bool{}}, pages: pages, release: make(chan struct{})}
	cfg := testConfig(newFakeClock())
	cfg.Batch.ListPrefetch = true
	c := mustNew(t, up, cfg)
	stop := make(chan struct{})
	t.Cleanup(func() { closeRig(c, stop) })
	c.Initialize(nil, stop)
	synctest.Wait()
	return up, c, enf(c)
}

// cachedZone is the zone the metadata cache holds for key, "" for none.
func cachedZone(g *enforcer, key nodeKey) string {
	md, _, ok := g.inst.metadata.c.Fresh(key)
	if !ok || md == nil {
		return ""
	}
	return md.Zone
}

func record(name, pid, zone string, rank int, deleted bool) InstanceRecord {
	return InstanceRecord{NodeName: name, NameRank: rank, Deleted: deleted,
		Metadata: cloudprovider.InstanceMetadata{ProviderID: pid, Zone: zone}}
}

// A name unique per zone only (GCE) lists two live records with one
// NodeName; the upstream's own lookup by name finds the lowest-ranked (its
// first managed zone). The list answers by name as it would whatever the
// pages' order, and never the other record, not even between the pages.
// Without the rank the last record listed answered, and a record on the
// first page answered until the second page came.
func TestListNameAnswersLowestRank(t *testing.T) {
	first := record("vm", "fake://zone-a/vm", "zone-a", 0, false)
	other := record("vm", "fake://zone-b/vm", "zone-b", 1, false)
	for _, tc := range []struct {
		name         string
		page1, page2 InstanceRecord
	}{
		{"first zone on page 1", first, other},
		{"first zone on page 2", other, first},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				up, c, g := listRig(t, []InstanceRecord{tc.page1}, []InstanceRecord{tc.page2})
				byName := nodeKey{id: "vm"}
				if z := cachedZone(g, byName); z == "zone-b" {
					t.Fatal("between the pages the list answers by name with zone-b's record; want never the higher rank")
				}
				close(up.release)
				synctest.Wait()
				if z := cachedZone(g, byName); z != "zone-a" {
					t.Fatalf("after the list, by name: zone %q; want zone-a (the lowest rank)", z)
				}
				md, err := v2(t, c).InstanceMetadata(context.Background(), testNode("vm", ""))
				if err != nil || md.ProviderID != "fake://zone-a/vm" {
					t.Fatalf("InstanceMetadata(vm without provider ID) = %+v, %v; want the zone-a instance", md, err)
				}
				for _, r := range []InstanceRecord{first, other} {
					if z := cachedZone(g, nodeKey{byProviderID: true, id: r.Metadata.ProviderID}); z != r.Metadata.Zone {
						t.Errorf("by provider ID %s: zone %q, want %q", r.Metadata.ProviderID, z, r.Metadata.Zone)
					}
				}
			})
		})
	}
}

// Two live records with one NodeName and one rank (the AWS provider fails
// "multiple instances found" for such a name): the list answers nothing by
// that name, and the upstream's own lookup answers. One instance listed on
// two pages is no tie.
func TestListNameTiedAnswersNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up, _, g := listRig(t,
			[]InstanceRecord{record("vm", "fake://1", "zone-a", 0, false), record("one", "fake://one", "zone-a", 0, false)},
			[]InstanceRecord{record("vm", "fake://2", "zone-b", 0, false), record("one", "fake://one", "zone-a", 0, false)})
		close(up.release)
		synctest.Wait()
		if z := cachedZone(g, nodeKey{id: "vm"}); z != "" {
			t.Fatalf("a name two records share answers zone %q from the list; want no answer", z)
		}
		if z := cachedZone(g, nodeKey{id: "one"}); z != "zone-a" {
			t.Fatalf("a name one record has: zone %q, want zone-a", z)
		}
	})
}

// A live and a Deleted record under one provider ID (an instance
// re-created under a name-based ID), on two pages in either order: no
// answer of the Deleted record's is ever served, not even between the
// pages (it overwrote the live instance's metadata and shutdown answers
// until the live record's page came: the terminated instance's zone, type
// and addresses). A Deleted record that no live one contradicts answers
// once the list ends.
func TestListDeletedRecordNeverAnswersForLive(t *testing.T) {
	live := InstanceRecord{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a", Zone: "new", InstanceType: "big"}}
	gone := InstanceRecord{NodeName: "a", Metadata: cloudprovider.InstanceMetadata{ProviderID: "fake://a", Zone: "old", InstanceType: "small"}, Shutdown: true, Deleted: true}
	pid := nodeKey{byProviderID: true, id: "fake://a"}
	for _, deletedFirst := range []bool{true, false} {
		t.Run(fmt.Sprint("deletedFirst=", deletedFirst), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p1, p2 := live, gone
				if deletedFirst {
					p1, p2 = gone, live
				}
				up, c, g := listRig(t, []InstanceRecord{p1}, []InstanceRecord{p2})
				if z := cachedZone(g, pid); z == "old" {
					t.Fatal("between the pages the Deleted record's metadata is cached for a provider ID a live record has")
				}
				if sh, _, ok := g.inst.shutdown.c.Fresh(pid); ok && sh {
					t.Fatal("between the pages the Deleted record's shutdown answer is cached")
				}
				if ex, _, ok := g.inst.exists.c.Fresh(pid); ok && !ex {
					t.Fatal("between the pages the Deleted record's \"does not exist\" is cached")
				}
				close(up.release)
				synctest.Wait()
				md, err := v2(t, c).InstanceMetadata(context.Background(), testNode("a", "fake://a"))
				if err != nil || md.Zone != "new" || md.InstanceType != "big" {
					t.Fatalf("InstanceMetadata = %+v, %v; want the live instance's", md, err)
				}
				sh, err := v2(t, c).InstanceShutdown(context.Background(), testNode("a", "fake://a"))
				if err != nil || sh {
					t.Fatalf("InstanceShutdown = %v, %v; want the live instance's false", sh, err)
				}
				ok, err := v2(t, c).InstanceExists(context.Background(), testNode("a", "fake://a"))
				if err != nil || !ok {
					t.Fatalf("InstanceExists = %v, %v; want true", ok, err)
				}
				up.mu.Lock()
				single := up.single
				up.mu.Unlock()
				if single != 0 || len(up.batchSizes()) != 0 {
					t.Fatalf("%d calls and batches %v: want every answer from the list", single, up.batchSizes())
				}
			})
		})
	}
	t.Run("deleted alone", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			up, c, g := listRig(t, []InstanceRecord{gone}, []InstanceRecord{record("b", "fake://b", "zone-b", 0, false)})
			close(up.release)
			synctest.Wait()
			if z := cachedZone(g, pid); z != "old" {
				t.Fatalf("a Deleted record no live one contradicts: cached zone %q, want old", z)
			}
			ok, err := v2(t, c).InstanceExists(context.Background(), testNode("a", "fake://a"))
			if err != nil || ok {
				t.Fatalf("InstanceExists = %v, %v; want false at once (terminated)", ok, err)
			}
		})
	})
}

// Answers by node name wait for the list's end, but their age still counts
// from their own page: over a list of 12 pages taking 55 s, a by-name answer
// is never served more than negativeTTL (30 s, by-name answers' bound) after
// its page was fetched; stored at the list's end with a fresh TTL, the first
// pages' were served 55 s old and more.
func TestListedByNameAgeFromItsPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up, c, g, stop := newSlowListRig(t)
		defer closeRig(c, stop)
		bound := DefaultConfig().Cache.NegativeTTL.Duration
		fresh := 0
		for s := 0; s < 12*60; s++ {
			synctest.Wait()
			now := up.clk.Now()
			for i := range up.pages {
				md, _, ok := g.inst.metadata.c.Fresh(nodeKey{id: fmt.Sprint("n", i)})
				if !ok {
					continue
				}
				fresh++
				at, _ := strconv.ParseInt(md.Zone, 10, 64)
				if age := now.Sub(time.Unix(0, at)); age > bound {
					t.Fatalf("t=%ds: node n%d's listed answer by name served %v after its page was fetched; want at most %v", s, i, age, bound)
				}
			}
			up.clk.Step(time.Second)
		}
		if fresh == 0 {
			t.Fatal("no answer by name was ever served from a list")
		}
	})
}
