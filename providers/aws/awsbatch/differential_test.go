package awsbatch_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

const cluster = "diff"

// fakeBuilder is the client builder the AWS provider's Initialize needs
// (it asks the kube API for its version), on a fake clientset.
type fakeBuilder struct{ cs kubernetes.Interface }

func (b fakeBuilder) Config(string) (*rest.Config, error)         { return &rest.Config{}, nil }
func (b fakeBuilder) ConfigOrDie(string) *rest.Config             { return &rest.Config{} }
func (b fakeBuilder) Client(string) (kubernetes.Interface, error) { return b.cs, nil }
func (b fakeBuilder) ClientOrDie(string) kubernetes.Interface     { return b.cs }

// CloudConfig is the AWS provider's cloud config for a simulated endpoint:
// no instance-metadata service, static credentials from the environment.
func CloudConfig(url, families string) string {
	cfg := fmt.Sprintf(`[Global]
Zone = us-east-1a
VPC = vpc-0sim
SubnetID = subnet-0sim
KubernetesClusterID = %s
`, cluster)
	if families != "" {
		cfg += families
	}
	return cfg + fmt.Sprintf(`
[ServiceOverride "1"]
Service = EC2
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = ec2
`, url)
}

func setAWSEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", ec2sim.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", ec2sim.SecretAccessKey)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
}

func iid(n int) string { return fmt.Sprintf("i-%017x", n) }

func dns(n int) string { return fmt.Sprintf("ip-10-0-0-%d.ec2.internal", n) }

var tagged = map[string]string{"kubernetes.io/cluster/" + cluster: "owned"}

// fleet is the simulated instances: every state the lifecycle cares about,
// public and private addresses, several interfaces, three zones, topology.
func fleet() []ec2sim.Instance {
	nic := func(dev int, ips ...string) ec2sim.NetworkInterface {
		return ec2sim.NetworkInterface{DeviceIndex: dev, Status: "in-use", PrivateIPs: ips, IPv6Addresses: []string{fmt.Sprintf("2600:1f18::%d", dev+1)}}
	}
	return []ec2sim.Instance{
		{ID: iid(1), Type: "m5.large", Zone: "us-east-1a", PrivateDNSName: dns(1), PublicDNSName: "ec2-54-0-0-1.compute-1.amazonaws.com",
			PrivateIP: "10.0.0.1", PublicIP: "54.0.0.1", Tags: tagged,
			// device 1 listed first: the provider orders by device index
			Interfaces: []ec2sim.NetworkInterface{nic(1, "10.0.1.1"), nic(0, "10.0.0.1", "10.0.0.101"),
				{DeviceIndex: 2, Status: "detaching", PrivateIPs: []string{"10.0.2.1"}}}},
		{ID: iid(2), Type: "m5.xlarge", Zone: "us-east-1b", State: ec2sim.StateStopped, PrivateDNSName: dns(2), PrivateIP: "10.0.0.2",
			Tags: tagged, Interfaces: []ec2sim.NetworkInterface{nic(0, "10.0.0.2")}},
		{ID: iid(3), Type: "m5.large", Zone: "us-east-1c", State: ec2sim.StateTerminated, PrivateDNSName: dns(3), Tags: tagged},
		{ID: iid(4), Type: "p5.48xlarge", Zone: "us-east-1b", PrivateDNSName: dns(4), PrivateIP: "10.0.0.4", Tags: tagged,
			Interfaces: []ec2sim.NetworkInterface{nic(0, "10.0.0.4")}, NetworkNodes: []string{"nn-1", "nn-2", "nn-3"}},
		{ID: iid(5), Type: "c6i.large", Zone: "us-east-1c", PrivateDNSName: dns(5), PrivateIP: "10.0.0.5",
			Tags: map[string]string{"KubernetesCluster": cluster}, Interfaces: []ec2sim.NetworkInterface{nic(0, "10.0.0.5")}},
		// Not the cluster's: found by ID (the provider does not check tags
		// there) but neither by name nor in the list.
		{ID: iid(6), Type: "t3.micro", Zone: "us-east-1a", PrivateDNSName: dns(6), PrivateIP: "10.0.0.6",
			Interfaces: []ec2sim.NetworkInterface{nic(0, "10.0.0.6")}},
		{ID: iid(7), Type: "p5.48xlarge", Zone: "us-east-1a", State: ec2sim.StateStopped, PrivateDNSName: dns(7), Tags: tagged},
		{ID: iid(8), Type: "m5.large", Zone: "us-east-1a", State: ec2sim.StatePending, PrivateDNSName: dns(8), Tags: tagged},
	}
}

func node(name, providerID string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: v1.NodeSpec{ProviderID: providerID}}
}

// nodes covers each way the provider finds an instance: provider ID (with
// and without the aws:// form), resource-based name, private DNS name.
func nodes() []*v1.Node {
	pid := func(zone string, n int) string { return "aws:///" + zone + "/" + iid(n) }
	return []*v1.Node{
		node("n1", pid("us-east-1a", 1), nil),
		node("n2", pid("us-east-1b", 2), nil),
		node("n3", pid("us-east-1c", 3), nil),
		node("n4", pid("us-east-1b", 4), nil),
		node("n5", pid("us-east-1c", 5), nil),
		node("n6", pid("us-east-1a", 6), nil),
		node("n7", pid("us-east-1a", 7), nil),
		node("n8", pid("us-east-1a", 8), nil),
		node("missing", pid("us-east-1a", 99), nil),
		node("bare", iid(1), nil),
		node("labelled", pid("us-east-1b", 4), map[string]string{"topology.k8s.aws/zone-id": "x", "topology.k8s.aws/network-node-layer-1": "y"}),
		node("bad-provider-id", "gce://p/z/vm", nil),
		node("malformed-id", "aws:///us-east-1a/i-notanid", nil), // passes the provider's i-* check, not EC2's
		node(iid(2), "", nil),                                    // resource-based name, stopped
		node(iid(3)+".ec2.internal", "", nil),                    // resource-based name, terminated
		node(iid(98), "", nil),                                   // resource-based name, missing
		node(dns(1), "", nil),                                    // private DNS name
		node(dns(3), "", nil),                                    // terminated: not found by name
		node(dns(6), "", nil),                                    // not the cluster's: not found by name
		node("ip-10-9-9-9.ec2.internal", "", nil),                // missing
		node(dns(5), "", nil),                                    // legacy cluster tag
	}
}

type answer struct {
	md       *cloudprovider.InstanceMetadata
	mdErr    error
	exists   bool
	exErr    error
	shutdown bool
	shErr    error
}

func upstreamAnswer(ctx context.Context, up cloudprovider.InstancesV2, n *v1.Node) answer {
	var a answer
	a.md, a.mdErr = up.InstanceMetadata(ctx, n)
	a.exists, a.exErr = up.InstanceExists(ctx, n)
	a.shutdown, a.shErr = up.InstanceShutdown(ctx, n)
	return a
}

// compare checks one batch answer against the provider's own three answers
// under the batch contract: Err == InstanceNotFound means exists=false and a
// metadata error that is InstanceNotFound; another Err is the metadata
// error; otherwise the metadata is identical, Deleted == !exists and
// Shutdown == shutdown.
func compare(t *testing.T, what string, up answer, st provider.InstanceStatus) {
	t.Helper()
	switch {
	case st.Err == cloudprovider.InstanceNotFound:
		if up.exists || up.exErr != nil {
			t.Errorf("%s: adapter says not found, provider InstanceExists = %v, %v", what, up.exists, up.exErr)
		}
		if !errors.Is(up.mdErr, cloudprovider.InstanceNotFound) {
			t.Errorf("%s: adapter says not found, provider InstanceMetadata err = %v", what, up.mdErr)
		}
		if up.shutdown {
			t.Errorf("%s: adapter says not found, provider InstanceShutdown = true", what)
		}
	case st.Err != nil:
		// Another per-node error: the provider errs too, and does not say "gone".
		if up.mdErr == nil || errors.Is(up.mdErr, cloudprovider.InstanceNotFound) || up.exErr == nil {
			t.Errorf("%s: adapter error %q, provider InstanceMetadata error %v, InstanceExists %v, %v", what, st.Err, up.mdErr, up.exists, up.exErr)
		}
	default:
		if up.mdErr != nil || up.exErr != nil || up.shErr != nil {
			t.Errorf("%s: adapter answered, provider errors: %v / %v / %v", what, up.mdErr, up.exErr, up.shErr)
			return
		}
		if !reflect.DeepEqual(up.md, st.Metadata) {
			t.Errorf("%s: metadata differs\nprovider %+v\n adapter %+v", what, up.md, st.Metadata)
		}
		if up.exists == st.Deleted {
			t.Errorf("%s: provider InstanceExists = %v, adapter Deleted = %v", what, up.exists, st.Deleted)
		}
		if up.shutdown != st.Shutdown {
			t.Errorf("%s: provider InstanceShutdown = %v, adapter Shutdown = %v", what, up.shutdown, st.Shutdown)
		}
	}
}

func TestDifferential(t *testing.T) {
	for _, tc := range []struct{ name, families string }{
		{"ipv4", ""},
		{"ipv6 then ipv4", "NodeIPFamilies = ipv6\nNodeIPFamilies = ipv4\n"},
	} {
		t.Run(tc.name, func(t *testing.T) { differential(t, tc.families) })
	}
}

// startFleet starts ec2sim in three zones with topology and fleet's
// instances, and aws-batch over it (families: the NodeIPFamilies lines),
// initialised.
func startFleet(t *testing.T, families string) (*ec2sim.Server, *awsbatch.Cloud) {
	t.Helper()
	setAWSEnv(t)
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Unthrottled: true, Topology: true,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	sim.Put(fleet()...)
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, families)))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	c.Initialize(fakeBuilder{fake.NewClientset()}, stop)
	return sim, c
}

func differential(t *testing.T, families string) {
	sim, c := startFleet(t, families)
	v2, ok := c.Unwrap().InstancesV2()
	if !ok {
		t.Fatal("the AWS provider has no InstancesV2")
	}
	ad := c.BatchInstances()
	ctx := context.Background()

	ns := nodes()
	want := make([]answer, len(ns))
	for i, n := range ns {
		want[i] = upstreamAnswer(ctx, v2, n)
	}

	sim.ResetStats()
	got, err := ad.BatchInstanceStatus(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ns) {
		t.Fatalf("%d answers for %d nodes", len(got), len(ns))
	}
	for i, n := range ns {
		compare(t, "batch "+n.Name, want[i], got[i])
	}
	// One call for the IDs, one for the names; zones cached from the first lookup.
	// The SDK's own retries of a failed attempt (a loaded machine) are not
	// the adapter's calls; they are logged so that a failure shows them.
	st := sim.Stats("DescribeInstances")
	if st.Retries > 0 {
		t.Logf("the SDK retried %d of %d DescribeInstances requests (%+v)", st.Retries, st.Requests, st)
	}
	if calls := st.Requests - st.Retries; calls != 2 {
		t.Errorf("batch of %d nodes made %d DescribeInstances calls, want 2 (%+v; by shape: %v)", len(ns), calls, st, sim.DescribeShapes())
	}
	// Expected shapes, so that a change in the provider cannot make both sides agree vacuously.
	byName := map[string]provider.InstanceStatus{}
	for i, n := range ns {
		byName[n.Name] = got[i]
	}
	for name, check := range map[string]func(provider.InstanceStatus) bool{
		"n1": func(s provider.InstanceStatus) bool {
			return s.Err == nil && !s.Deleted && !s.Shutdown && s.Metadata.Zone == "us-east-1a"
		},
		"n2": func(s provider.InstanceStatus) bool { return s.Err == nil && s.Shutdown },
		"n3": func(s provider.InstanceStatus) bool { return s.Err == nil && s.Deleted },
		"n4": func(s provider.InstanceStatus) bool {
			return s.Metadata.AdditionalLabels["topology.k8s.aws/network-node-layer-3"] == "nn-3"
		},
		"missing":         func(s provider.InstanceStatus) bool { return s.Err == cloudprovider.InstanceNotFound },
		"bad-provider-id": func(s provider.InstanceStatus) bool { return s.Err != nil && s.Err != cloudprovider.InstanceNotFound },
		"malformed-id":    func(s provider.InstanceStatus) bool { return s.Err != nil && s.Err != cloudprovider.InstanceNotFound },
		dns(1): func(s provider.InstanceStatus) bool {
			return s.Err == nil && s.Metadata.ProviderID == "aws:///us-east-1a/"+iid(1)
		},
		dns(3): func(s provider.InstanceStatus) bool { return s.Err == cloudprovider.InstanceNotFound },
		dns(6): func(s provider.InstanceStatus) bool { return s.Err == cloudprovider.InstanceNotFound },
	} {
		if !check(byName[name]) {
			t.Errorf("node %s: unexpected answer %+v", name, byName[name])
		}
	}
	if md := byName["n1"].Metadata; md != nil && families == "" {
		wantAddrs := []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeInternalIP, Address: "10.0.0.101"},
			{Type: v1.NodeInternalIP, Address: "10.0.1.1"}, {Type: v1.NodeExternalIP, Address: "54.0.0.1"},
			{Type: v1.NodeInternalDNS, Address: dns(1)}, {Type: v1.NodeHostName, Address: dns(1)},
			{Type: v1.NodeExternalDNS, Address: "ec2-54-0-0-1.compute-1.amazonaws.com"},
		}
		if !reflect.DeepEqual(md.NodeAddresses, wantAddrs) {
			t.Errorf("n1 addresses = %v, want %v", md.NodeAddresses, wantAddrs)
		}
	}

	// The list: exactly the cluster's live instances (both tag styles), each
	// equal to the provider's answer for a node with its provider ID, and
	// for its name.
	var recs []provider.InstanceRecord
	tok := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("ListInstances does not end")
		}
		page, next, err := ad.ListInstances(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, page...)
		if next == "" {
			break
		}
		tok = next
	}
	var listed []string
	for _, r := range recs {
		listed = append(listed, r.Metadata.ProviderID)
		n := node("list", r.Metadata.ProviderID, nil)
		compare(t, "list "+r.Metadata.ProviderID, upstreamAnswer(ctx, v2, n), provider.InstanceStatus{Metadata: &r.Metadata, Shutdown: r.Shutdown, Deleted: r.Deleted})
		if r.NodeName != "" {
			compare(t, "list by name "+r.NodeName, upstreamAnswer(ctx, v2, node(r.NodeName, "", nil)), provider.InstanceStatus{Metadata: &r.Metadata, Shutdown: r.Shutdown})
		} else if !r.Deleted {
			t.Errorf("list %s: no node name", r.Metadata.ProviderID)
		}
	}
	sort.Strings(listed)
	wantListed := []string{}
	for _, in := range fleet() {
		if in.ID != iid(6) && in.State != ec2sim.StateTerminated { // 6: another cluster's
			wantListed = append(wantListed, "aws:///"+in.Zone+"/"+in.ID)
		}
	}
	sort.Strings(wantListed)
	if !reflect.DeepEqual(listed, wantListed) {
		t.Errorf("listed %v\nwant %v", listed, wantListed)
	}
}

func TestBatchRejectsOversize(t *testing.T) {
	setAWSEnv(t)
	sim, err := ec2sim.Start(ec2sim.Config{Region: "us-east-1", Unthrottled: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	ns := make([]*v1.Node, awsbatch.MaxBatchSize+1)
	for i := range ns {
		ns[i] = node(fmt.Sprint(i), "aws:///us-east-1a/"+iid(i+1), nil)
	}
	if _, err := c.BatchInstances().BatchInstanceStatus(context.Background(), ns); err == nil {
		t.Fatal("a batch over MaxBatchSize was accepted")
	}
	if got := c.BatchInstances().MaxBatchSize(); got != 200 {
		t.Fatalf("MaxBatchSize = %d", got)
	}
}

// ListInstances pages through more instances than one EC2 page holds, then the
// legacy-tagged ones, and ends.
func TestListInstancesPages(t *testing.T) {
	setAWSEnv(t)
	sim, err := ec2sim.Start(ec2sim.Config{Region: "us-east-1", Unthrottled: true, Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	const tagged, legacy = 1005, 3
	for i := 1; i <= tagged+legacy; i++ {
		in := ec2sim.Instance{ID: iid(i), Type: "m5.large", Zone: "us-east-1a", PrivateDNSName: dns(i), Tags: map[string]string{"kubernetes.io/cluster/" + cluster: "owned"}}
		if i > tagged {
			in.Tags = map[string]string{"KubernetesCluster": cluster}
		}
		sim.Put(in)
	}
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	pages, tok := 0, ""
	for {
		page, next, err := c.BatchInstances().ListInstances(context.Background(), tok)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page {
			if seen[r.Metadata.ProviderID] {
				t.Fatalf("%s listed twice", r.Metadata.ProviderID)
			}
			seen[r.Metadata.ProviderID] = true
		}
		if next == "" || pages > 5 {
			break
		}
		tok = next
	}
	if len(seen) != tagged+legacy || pages != 3 {
		t.Fatalf("listed %d instances in %d pages, want %d in 3 (1000 + 5 tagged, then 3 legacy)", len(seen), pages, tagged+legacy)
	}
	if got := sim.Stats("DescribeInstances").Requests; got != 3 {
		t.Fatalf("%d DescribeInstances calls, want 3", got)
	}
	if _, _, err := c.BatchInstances().ListInstances(context.Background(), "not-a-token"); err == nil {
		t.Fatal("a foreign page token was accepted")
	}
}

// walk lists every page and returns the provider IDs listed and the pages.
func walk(t *testing.T, l provider.InstanceLister) (map[string]bool, int) {
	t.Helper()
	seen := map[string]bool{}
	pages, tok := 0, ""
	for {
		page, next, err := l.ListInstances(context.Background(), tok)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page {
			seen[r.Metadata.ProviderID] = true
		}
		if next == "" || pages > 10 {
			return seen, pages
		}
		tok = next
	}
}

// TestListSkipsTerminatedAndEmptyLegacyPhase: the list leaves terminated
// instances out (EC2 describes them for about an hour; a lookup of one goes
// to a batch call); and while the legacy-tag phase finds no instance, a walk
// reads it only every LegacyRecheck-th time, so a legacy-tagged instance
// launched meanwhile is listed at the latest on that walk, and then on
// every walk while any is.
func TestListSkipsTerminatedAndEmptyLegacyPhase(t *testing.T) {
	setAWSEnv(t)
	sim, err := ec2sim.Start(ec2sim.Config{Region: "us-east-1", Unthrottled: true, Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	tags := map[string]string{"kubernetes.io/cluster/" + cluster: "owned"}
	for i := 1; i <= 3; i++ {
		sim.Put(ec2sim.Instance{ID: iid(i), Type: "m5.large", Zone: "us-east-1a", PrivateDNSName: dns(i), Tags: tags})
	}
	sim.SetState(iid(3), ec2sim.StateTerminated)
	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	l := c.BatchInstances()
	pid := func(n int) string { return "aws:///us-east-1a/" + iid(n) }

	// The first walk reads the legacy phase (none yet); the next five skip it.
	for w := 1; w <= 6; w++ {
		seen, pages := walk(t, l)
		want := 1
		if w == 1 {
			want = 2
		}
		if pages != want || len(seen) != 2 || !seen[pid(1)] || !seen[pid(2)] {
			t.Fatalf("walk %d: %d pages listing %v, want %d pages listing instances 1 and 2 (3 is terminated)", w, pages, seen, want)
		}
	}
	// A legacy-tagged instance: the 7th walk reads the legacy phase again
	// (the 6th since the last) and lists it, and so does every walk while it is.
	sim.Put(ec2sim.Instance{ID: iid(4), Type: "m5.large", Zone: "us-east-1a", PrivateDNSName: dns(4), Tags: map[string]string{"KubernetesCluster": cluster}})
	for w := 7; w <= 9; w++ {
		if seen, pages := walk(t, l); pages != 2 || !seen[pid(4)] {
			t.Fatalf("walk %d: %d pages listing %v, want 2 pages with the legacy-tagged instance 4", w, pages, seen)
		}
	}
	// Gone again: one more legacy phase finds none, then walks skip it.
	sim.SetState(iid(4), ec2sim.StateTerminated)
	if _, pages := walk(t, l); pages != 2 {
		t.Fatalf("walk 10: %d pages, want 2 (the legacy phase, now empty)", pages)
	}
	if _, pages := walk(t, l); pages != 1 {
		t.Fatalf("walk 11: %d pages, want 1 (the legacy phase skipped)", pages)
	}
}

// TestListedByNameMatchesProvider: cloudgate over the adapter, answering from its list,
// equals the provider for private DNS names that several instances of the cluster have: a
// terminated and a live one, on different pages in either order (the cluster tag's page,
// then the legacy tag's), which the provider answers by name as the live one; and two live
// ones, for which the provider fails ("multiple instances found") and so does cloudgate (it
// leaves that name to the provider's own lookup). Every instance answers by its provider ID
// as the provider does, the terminated ones included. The list, not a per-node call,
// answers every name but the shared one, and every live instance by provider ID; each
// terminated one, which the list leaves out, costs a batch call.
func TestListedByNameMatchesProvider(t *testing.T) {
	setAWSEnv(t)
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Unthrottled: true,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	legacy := map[string]string{"KubernetesCluster": cluster}
	put := func(n int, zone, state, dnsName string, tags map[string]string) {
		sim.Put(ec2sim.Instance{ID: iid(n), Type: "m5.large", Zone: zone, State: state, PrivateDNSName: dnsName,
			PrivateIP: fmt.Sprintf("10.0.9.%d", n), Tags: tags,
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{fmt.Sprintf("10.0.9.%d", n)}}}})
	}
	put(1, "us-east-1a", ec2sim.StateTerminated, dns(1), tagged) // page 1, then its name's live instance on page 2
	put(2, "us-east-1b", "", dns(1), legacy)
	put(3, "us-east-1a", "", dns(3), tagged) // page 1, then its name's terminated instance on page 2
	put(4, "us-east-1b", ec2sim.StateTerminated, dns(3), legacy)
	put(5, "us-east-1a", "", dns(5), tagged) // two live instances, one name
	put(6, "us-east-1b", ec2sim.StateStopped, dns(5), tagged)

	c, err := awsbatch.New([]byte(CloudConfig(sim.URL, "")))
	if err != nil {
		t.Fatal(err)
	}
	cfg := provider.DefaultConfig()
	cfg.Limits.Read.QPS, cfg.Limits.Read.Burst = 1e6, 1e6
	cfg.Batch.ListPrefetch = true
	// The not-found guard holds a first "does not exist" back by design; a fake clock: one
	// list, and no answer expires.
	off := false
	cfg.NotFoundGuard.Enabled = &off
	cfg.Clock = clocktesting.NewFakeClock(time.Unix(10000, 0))
	gated, err := provider.New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		_ = gated.(interface{ Close() error }).Close()
	})
	gated.Initialize(fakeBuilder{fake.NewClientset()}, stop)
	up, _ := c.Unwrap().InstancesV2()
	through, _ := gated.InstancesV2()
	ctx := context.Background()

	pid := func(zone string, n int) string { return "aws:///" + zone + "/" + iid(n) }
	listedNodes := []*v1.Node{
		node(dns(1), "", nil), node(dns(3), "", nil),
		node("p1", pid("us-east-1a", 1), nil), node("p2", pid("us-east-1b", 2), nil),
		node("p3", pid("us-east-1a", 3), nil), node("p4", pid("us-east-1b", 4), nil),
		node("p5", pid("us-east-1a", 5), nil), node("p6", pid("us-east-1b", 6), nil),
	}
	shared := node(dns(5), "", nil)

	if _, err := through.InstanceExists(ctx, listedNodes[0]); err != nil { // waits for the first list
		t.Fatal(err)
	}
	before := sim.Stats("DescribeInstances").Requests
	got := make([]answer, len(listedNodes))
	for i, n := range listedNodes {
		got[i] = upstreamAnswer(ctx, through, n)
	}
	if n := sim.Stats("DescribeInstances").Requests - before; n != 2 {
		t.Errorf("cloudgate made %d DescribeInstances calls, want every live instance's answers from the list and a batch for each of the two terminated ones (looked up one after the other)", n)
	}
	gotShared := upstreamAnswer(ctx, through, shared)
	for i, n := range append(listedNodes, shared) {
		g := gotShared
		if i < len(got) {
			g = got[i]
		}
		want := upstreamAnswer(ctx, up, n)
		what := fmt.Sprintf("node %s (providerID %q)", n.Name, n.Spec.ProviderID)
		if !reflect.DeepEqual(want.md, g.md) || (want.mdErr == nil) != (g.mdErr == nil) {
			t.Errorf("%s: metadata: provider %+v, %v; cloudgate over the list %+v, %v", what, want.md, want.mdErr, g.md, g.mdErr)
		}
		if want.exists != g.exists || (want.exErr == nil) != (g.exErr == nil) {
			t.Errorf("%s: exists: provider %v, %v; cloudgate over the list %v, %v", what, want.exists, want.exErr, g.exists, g.exErr)
		}
		if want.shutdown != g.shutdown || (want.shErr == nil) != (g.shErr == nil) {
			t.Errorf("%s: shutdown: provider %v, %v; cloudgate over the list %v, %v", what, want.shutdown, want.shErr, g.shutdown, g.shErr)
		}
	}
	// Expected shapes, so that both sides cannot agree vacuously.
	if got[0].md == nil || got[0].md.ProviderID != pid("us-east-1b", 2) || got[1].md == nil || got[1].md.ProviderID != pid("us-east-1a", 3) {
		t.Errorf("by name: %+v and %+v, want the live instances 2 and 3", got[0].md, got[1].md)
	}
	if gotShared.mdErr == nil {
		t.Errorf("a name two live instances have: %+v, want the provider's error", gotShared.md)
	}
}
