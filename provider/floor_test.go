package provider

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	"k8s.io/cloud-provider/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cloudgate/cloudgate/provider/floor"
)

// floorCloud is an EC2-like upstream for the floor test: instances by ID
// with a node name each, a batch call that costs one DescribeInstances for
// its instance IDs and one per 150 node names (aws-batch's filters), a
// list of pages of 1,000 that still describes terminated instances for an
// hour, and every DescribeInstances taking latency on the clock.
type floorCloud struct {
	*fake.Cloud
	clk     *clocktesting.FakeClock
	latency time.Duration

	mu        sync.Mutex
	instances map[string]*floorInstance // by instance ID
	order     []string                  // instance IDs as created: the list's order
	byName    map[string]string         // live instances' node names → ID
	// DescribeInstances by shape.
	byIDCalls, byNameCalls, listPages int
}

type floorInstance struct {
	id, name   string
	terminated time.Time // zero: running
}

const floorNameChunk = 150 // aws-batch's names per DescribeInstances

func newFloorCloud(clk *clocktesting.FakeClock) *floorCloud {
	return &floorCloud{Cloud: &fake.Cloud{Provider: "fake"}, clk: clk, latency: 50 * time.Millisecond,
		instances: map[string]*floorInstance{}, byName: map[string]string{}}
}

func (f *floorCloud) InstancesV2() (cloudprovider.InstancesV2, bool) { return f, true }
func (f *floorCloud) MaxBatchSize() int                              { return 200 }

func (f *floorCloud) add(id, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.instances[id] = &floorInstance{id: id, name: name}
	f.order = append(f.order, id)
	f.byName[name] = id
}

func (f *floorCloud) terminate(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := f.instances[id]
	in.terminated = f.clk.Now()
	delete(f.byName, in.name)
}

func (f *floorCloud) describe() { f.clk.Step(f.latency) }

func (f *floorCloud) statusOf(in *floorInstance) InstanceStatus {
	md := &cloudprovider.InstanceMetadata{ProviderID: "fake://" + in.id, InstanceType: "m5.large", Zone: "zone-a",
		NodeAddresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}
	return InstanceStatus{Metadata: md, Deleted: !in.terminated.IsZero()}
}

// lookup answers one node as a batch does: by provider ID (terminated
// instances still described, Deleted), else by node name (live only).
func (f *floorCloud) lookup(n *v1.Node) InstanceStatus {
	id := ""
	if pid := n.Spec.ProviderID; pid != "" {
		id = pid[len("fake://"):]
	} else {
		id = f.byName[n.Name]
	}
	in, ok := f.instances[id]
	if !ok || (n.Spec.ProviderID == "" && !in.terminated.IsZero()) {
		return InstanceStatus{Err: cloudprovider.InstanceNotFound}
	}
	return f.statusOf(in)
}

func (f *floorCloud) BatchInstanceStatus(_ context.Context, nodes []*v1.Node) ([]InstanceStatus, error) {
	f.mu.Lock()
	ids, names := 0, 0
	out := make([]InstanceStatus, len(nodes))
	for i, n := range nodes {
		if n.Spec.ProviderID != "" {
			ids++
		} else {
			names++
		}
		out[i] = f.lookup(n)
	}
	calls := (names + floorNameChunk - 1) / floorNameChunk
	if ids > 0 {
		f.byIDCalls++
		calls++
	}
	f.byNameCalls += (names + floorNameChunk - 1) / floorNameChunk
	f.mu.Unlock()
	for range calls {
		f.describe()
	}
	return out, nil
}

func (f *floorCloud) one(n *v1.Node) InstanceStatus {
	st, _ := f.BatchInstanceStatus(context.Background(), []*v1.Node{n})
	return st[0]
}

func (f *floorCloud) InstanceExists(_ context.Context, n *v1.Node) (bool, error) {
	return existsOf(f.one(n))
}

func (f *floorCloud) InstanceShutdown(_ context.Context, n *v1.Node) (bool, error) {
	return shutdownOf(f.one(n))
}

func (f *floorCloud) InstanceMetadata(_ context.Context, n *v1.Node) (*cloudprovider.InstanceMetadata, error) {
	return metadataOf(f.one(n))
}

func (f *floorCloud) ListInstances(_ context.Context, token string) ([]InstanceRecord, string, error) {
	f.mu.Lock()
	from := 0
	if token != "" {
		from, _ = strconv.Atoi(token)
	}
	// aws-batch's list filters by instance-state-name: EC2's terminated
	// instances (described for about an hour) are not listed.
	var live []string
	for _, id := range f.order {
		if f.instances[id].terminated.IsZero() {
			live = append(live, id)
		}
	}
	var page []InstanceRecord
	for _, id := range live[min(from, len(live)):min(from+1000, len(live))] {
		in := f.instances[id]
		st := f.statusOf(in)
		page = append(page, InstanceRecord{NodeName: in.name, Metadata: *st.Metadata, Deleted: st.Deleted})
	}
	next := ""
	if from+1000 < len(live) {
		next = strconv.Itoa(from + 1000)
	}
	f.listPages++
	f.mu.Unlock()
	f.describe()
	return page, next, nil
}

func (f *floorCloud) counts() (byID, byName, list int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byIDCalls, f.byNameCalls, f.listPages
}

// floorCluster is the CCM's side: the Nodes (the node informer's store, as
// the controllers see it) and the three controllers that look instances up,
// run in virtual time.
type floorCluster struct {
	t     *testing.T
	up    *floorCloud
	i     cloudprovider.InstancesV2
	g     *enforcer
	store toolscache.Indexer
	rnd   *rand.Rand
	seq   int
}

func (c *floorCluster) node(name string) *v1.Node {
	obj, ok, _ := c.store.GetByKey(name)
	if !ok {
		return nil
	}
	return obj.(*v1.Node)
}

func (c *floorCluster) nodes(keep func(*v1.Node) bool) []*v1.Node {
	var out []*v1.Node
	for _, o := range c.store.List() {
		if n := o.(*v1.Node); keep(n) {
			out = append(out, n)
		}
	}
	// The informer's order is a map's: shuffled, but by the test's seed.
	slices.SortFunc(out, func(a, b *v1.Node) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	c.rnd.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func setReady(n *v1.Node, st v1.ConditionStatus) {
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: st}}
}

// addNode creates an instance and its Node: initialised (a provider ID)
// or as a kubelet registers it (the uninitialized taint, no provider ID).
func (c *floorCluster) addNode(initialised bool, st v1.ConditionStatus) {
	c.seq++
	id, name := fmt.Sprintf("i-%08d", c.seq), fmt.Sprintf("ip-10-0-%d.ec2.internal", c.seq)
	c.up.add(id, name)
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(c.up.clk.Now().Add(-time.Hour))}}
	if initialised {
		n.Spec.ProviderID = "fake://" + id
	} else {
		n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	}
	setReady(n, st)
	if err := c.store.Add(n); err != nil {
		c.t.Fatal(err)
	}
}

// lifecyclePass is the cloud node lifecycle controller's MonitorNodes with
// its one worker: every NotReady Node, InstanceExists then
// InstanceShutdown; a Node whose instance does not exist is deleted.
func (c *floorCluster) lifecyclePass(ctx context.Context) {
	for _, n := range c.nodes(func(n *v1.Node) bool { return !nodeReady(n) }) {
		exists, err := c.i.InstanceExists(ctx, n)
		var retry *cloudproviderapi.RetryError
		switch {
		case errors.As(err, &retry):
			continue // held by the not-found guard
		case err != nil:
			c.t.Fatalf("InstanceExists(%s): %v", n.Name, err)
		case !exists:
			if err := c.store.Delete(n); err != nil {
				c.t.Fatal(err)
			}
			continue
		}
		if _, err := c.i.InstanceShutdown(ctx, n); err != nil {
			c.t.Fatalf("InstanceShutdown(%s): %v", n.Name, err)
		}
	}
}

// statusRound is the cloud node controller's UpdateNodeStatus with its one
// worker: InstanceMetadata of every initialised Node.
func (c *floorCluster) statusRound(ctx context.Context) {
	for _, n := range c.nodes(func(n *v1.Node) bool { return len(n.Spec.Taints) == 0 }) {
		if _, err := c.i.InstanceMetadata(ctx, n); err != nil && !errors.Is(err, cloudprovider.InstanceNotFound) {
			c.t.Fatalf("InstanceMetadata(%s): %v", n.Name, err)
		}
	}
}

// churn: k Nodes join, each initialised in turn by the cloud node
// controller's one worker (InstanceMetadata by node name, then the
// provider ID set and the taint removed), and k leave (instance
// terminated, Node NotReady until the lifecycle controller deletes it).
func (c *floorCluster) churn(ctx context.Context, k int) {
	var joining []string
	for range k {
		c.addNode(false, v1.ConditionUnknown)
		joining = append(joining, fmt.Sprintf("ip-10-0-%d.ec2.internal", c.seq))
	}
	// A kubelet registers its Node before it reports Ready: one lifecycle
	// pass sees the joiners NotReady.
	c.lifecyclePass(ctx)
	for _, name := range joining {
		n := c.node(name).DeepCopy()
		setReady(n, v1.ConditionTrue)
		if err := c.store.Update(n); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, name := range joining {
		n := c.node(name)
		md, err := c.i.InstanceMetadata(ctx, n)
		if err != nil {
			c.t.Fatalf("initialising %s: %v", name, err)
		}
		n = n.DeepCopy()
		n.Spec.ProviderID, n.Spec.Taints = md.ProviderID, nil
		if err := c.store.Update(n); err != nil {
			c.t.Fatal(err)
		}
	}
	var leaving []*v1.Node
	for _, n := range c.nodes(nodeReady) {
		if len(leaving) < k {
			leaving = append(leaving, n)
		}
	}
	for _, n := range leaving {
		c.up.terminate(n.Spec.ProviderID[len("fake://"):])
		n = n.DeepCopy()
		setReady(n, v1.ConditionUnknown)
		if err := c.store.Update(n); err != nil {
			c.t.Fatal(err)
		}
	}
}

// TestNodeLookupsAtFloor is the floor check (provider/floor) in virtual
// time: the real-binary harness's workload — N Nodes, 1 % NotReady and held
// so, 10 joining and 10 leaving every 5 minutes, a status round every 5
// minutes, the lifecycle controller every 5 s, the list every
// batch.listInterval — for an hour after a warm-up, at the default
// configuration; cloudgate's DescribeInstances must be within 1.2× of the
// floor, by which the lifecycle checks cost one batch per shortest
// lifecycle TTL, and each churn step one call for its joining Nodes and one
// for its leaving ones.
func TestNodeLookupsAtFloor(t *testing.T) {
	for _, nodes := range []int{1000, 5000} {
		t.Run(fmt.Sprint(nodes), func(t *testing.T) {
			if testing.Short() && nodes > 1000 {
				t.Skip("short")
			}
			clk := newFakeClock()
			up := newFloorCloud(clk)
			cfg := testConfig(clk)
			c := mustNew(t, up, cfg)
			g := enf(c)
			factory := informers.NewSharedInformerFactory(kubefake.NewClientset(), 0)
			g.useNodeInformer(factory)
			cl := &floorCluster{t: t, up: up, i: v2(t, c), g: g, store: factory.Core().V1().Nodes().Informer().GetIndexer(),
				rnd: rand.New(rand.NewPCG(1, uint64(nodes)))}
			notReady := nodes / 100
			for k := range nodes {
				st := v1.ConditionTrue
				if k%100 == 0 {
					st = v1.ConditionFalse
				}
				cl.addNode(true, st)
			}
			g.buildBatcher(true)
			if g.lister == nil || g.batch == nil {
				t.Fatal("no list prefetch or no batching at the default configuration")
			}
			ttls := cfg.TTLs()
			interval, period := 5*time.Minute, 5*time.Minute
			w := floor.Workload{Nodes: nodes, NotReady: notReady, PageSize: 1000, MaxBatch: min(cfg.Batch.MaxSize, up.MaxBatchSize()),
				ListInterval: interval, ChurnEvery: period, JoinPerStep: 10, LeavePerStep: 10,
				LifecycleTTL: min(ttls["InstanceExists"], ttls["InstanceShutdown"])}
			fl, err := floor.PerHour(w)
			if err != nil {
				t.Fatal(err)
			}

			ctx := context.Background()
			start := clk.Now()
			// Each loop's next run: the lifecycle controller and the status
			// loop wait their period after a pass ends (wait.Until), the list
			// starts every interval, the churn ticks.
			type loop struct {
				name    string
				next    time.Time
				every   time.Duration
				sliding bool
				run     func()
			}
			loops := []*loop{
				{name: "list", next: start, every: interval, run: func() {
					if _, err := g.prefetch(ctx, listMaxFresh(interval)); err != nil {
						t.Fatal(err)
					}
				}},
				{name: "lifecycle", next: start.Add(time.Second), every: 5 * time.Second, sliding: true, run: func() { cl.lifecyclePass(ctx) }},
				// The status round and the churn between two lists, the
				// status round after the churn: the joined Nodes' first
				// status lookups come before the next list.
				{name: "churn", next: start.Add(200 * time.Second), every: period, run: func() { cl.churn(ctx, 10) }},
				{name: "status", next: start.Add(250 * time.Second), every: period, sliding: true, run: func() { cl.statusRound(ctx) }},
			}
			warmup, window := 10*time.Minute, time.Hour
			var id0, name0, list0 int
			counted := false
			for {
				l := slices.MinFunc(loops, func(a, b *loop) int { return a.next.Compare(b.next) })
				if !counted && !l.next.Before(start.Add(warmup)) {
					counted = true
					id0, name0, list0 = up.counts()
				}
				if !l.next.Before(start.Add(warmup + window)) {
					break
				}
				if clk.Now().Before(l.next) {
					clk.SetTime(l.next)
				}
				began := clk.Now()
				l.run()
				if l.sliding {
					l.next = clk.Now().Add(l.every)
				} else {
					l.next = began.Add(l.every)
				}
			}
			id1, name1, list1 := up.counts()
			byID, byName, list := id1-id0, name1-name0, list1-list0
			total := byID + byName + list
			ratio := float64(total) / fl.Total()
			t.Logf("%d Nodes, %d NotReady, an hour: %d DescribeInstances (list pages %d, by name %d, by instance ID %d); floor %.0f (list %.0f, join %.0f, leave %.0f, lifecycle %.0f): %.2f×",
				nodes, notReady, total, list, byName, byID, fl.Total(), fl.List, fl.Join, fl.Leave, fl.Lifecycle, ratio)
			if ratio > 1.2 {
				t.Errorf("%d DescribeInstances in the hour, %.2f× the floor's %.0f (want <= 1.2×)", total, ratio, fl.Total())
			}
		})
	}
}
