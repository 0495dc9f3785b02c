package gcesim

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	compute "google.golang.org/api/compute/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

func call(t *testing.T, s *Server, method, rel string, q url.Values) (int, []byte) {
	t.Helper()
	u := s.APIEndpoint() + "projects/" + s.Project() + "/" + rel
	if q != nil {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer gcesim-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, body
}

// TestQuotaWindow: a group's quota is spent per clock minute and refilled whole at the next;
// an exhausted group answers 403 rateLimitExceeded (or 429 RESOURCE_EXHAUSTED), counted as
// calls and as throttled, and leaves the other groups alone.
func TestQuotaWindow(t *testing.T) {
	for _, s429 := range []bool{false, true} {
		clk := clocktesting.NewFakePassiveClock(time.Date(2026, 11, 27, 10, 0, 30, 0, time.UTC))
		s, err := Start(Config{Quota: map[Group]int{GroupRead: 2}, Status429: s429, Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Put(Instance{Name: "a", Zone: s.Zones()[0], MachineType: "e2-small", InternalIP: "10.0.0.1"})
		get := func() (int, []byte) { return call(t, s, http.MethodGet, "zones/"+s.Zones()[0]+"/instances/a", nil) }
		for i := range 2 {
			if code, body := get(); code != http.StatusOK {
				t.Fatalf("get %d: HTTP %d %s", i, code, body)
			}
		}
		code, body := get()
		want := http.StatusForbidden
		if s429 {
			want = http.StatusTooManyRequests
		}
		var e struct {
			Error struct {
				Code   int
				Errors []struct{ Reason, Domain string }
			}
		}
		if err := json.Unmarshal(body, &e); err != nil || code != want || e.Error.Code != want ||
			len(e.Error.Errors) != 1 || e.Error.Errors[0].Reason != "rateLimitExceeded" || e.Error.Errors[0].Domain != "usageLimits" {
			t.Fatalf("429=%t: third get in the minute: HTTP %d %s (%v); want %d rateLimitExceeded", s429, code, body, err, want)
		}
		if code, _ := call(t, s, http.MethodGet, "zones", nil); code != http.StatusOK {
			t.Errorf("zones.list (the list group) answered %d while the read group was spent", code)
		}
		clk.SetTime(clk.Now().Add(30 * time.Second)) // the next minute
		if code, body := get(); code != http.StatusOK {
			t.Errorf("get in the next minute: HTTP %d %s", code, body)
		}
		if c, th := s.Calls()["compute.instances.get"], s.Throttled()["compute.instances.get"]; c != 4 || th != 1 {
			t.Errorf("counted %d instances.get, %d throttled; want 4 and 1", c, th)
		}
	}
}

// TestListFilterPages: instances.list with the adapter's name filter and aggregatedList in
// pages answer exactly the matching instances, each once; an unknown call is recorded.
func TestListFilterPages(t *testing.T) {
	s, err := Start(Config{PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 5 {
		s.Put(Instance{Name: fmt.Sprintf("n-%d", i), Zone: s.Zones()[i%3], MachineType: "e2-small", InternalIP: fmt.Sprintf("10.0.0.%d", i)})
	}
	code, body := call(t, s, http.MethodGet, "zones/"+s.Zones()[0]+"/instances", url.Values{"filter": {"name eq (n-0|n-3|n-4)"}})
	var l compute.InstanceList
	if err := json.Unmarshal(body, &l); err != nil || code != http.StatusOK {
		t.Fatalf("instances.list: HTTP %d %s", code, body)
	}
	if len(l.Items) != 2 || l.Items[0].Name != "n-0" || l.Items[1].Name != "n-3" {
		t.Errorf("filtered list of zone %s: %d items %+v; want n-0 and n-3", s.Zones()[0], len(l.Items), l.Items)
	}
	seen := map[string]int{}
	pages := 0
	for tok := ""; ; pages++ {
		q := url.Values{"maxResults": {"500"}}
		if tok != "" {
			q.Set("pageToken", tok)
		}
		code, body := call(t, s, http.MethodGet, "aggregated/instances", q)
		var a compute.InstanceAggregatedList
		if err := json.Unmarshal(body, &a); err != nil || code != http.StatusOK {
			t.Fatalf("aggregatedList: HTTP %d %s", code, body)
		}
		for _, sc := range a.Items {
			for _, in := range sc.Instances {
				seen[in.Name]++
			}
		}
		if tok = a.NextPageToken; tok == "" {
			break
		}
	}
	if len(seen) != 5 || pages != 2 {
		t.Errorf("aggregatedList: %v in %d pages; want 5 instances once each in 3 pages of 2", seen, pages+1)
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("%s listed %d times", n, c)
		}
	}
	if code, _ := call(t, s, http.MethodGet, "global/firewalls", nil); code != http.StatusNotFound || len(s.Unknown()) != 1 {
		t.Errorf("an unsimulated call: HTTP %d, unknown %q; want 404 and recorded", code, s.Unknown())
	}
}
