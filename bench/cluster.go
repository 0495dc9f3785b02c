package bench

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	"k8s.io/cloud-provider/controllers/route"
	"k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	_ "k8s.io/controller-manager/pkg/features/register" // registers the gates the route controller reads

	"github.com/cloudgate/cloudgate/bench/measure"
	"github.com/cloudgate/cloudgate/bench/simcloud"
)

// CCM defaults (package measure, shared with providers/aws/awsbench), before time
// compression.
const (
	nodeStatusUpdateFrequency = measure.StatusPeriod
	nodeMonitorPeriod         = measure.MonitorPeriod
	routeReconcilePeriod      = measure.RoutePeriod
)

var chanSizeOnce sync.Once

// raiseWatchChanSize lets the fake clientset's watches hold thousands of
// events: its watcher panics when its channel (100 events by default) is full.
func raiseWatchChanSize() {
	chanSizeOnce.Do(func() { watch.DefaultChanSize = 1 << 20 })
}

// ClusterConfig is one Kubernetes cluster run by the benchmark.
type ClusterConfig struct {
	// Name is the cluster name (route tables, load balancer ownership, node
	// name prefixes): unique among the clusters sharing one cloud account.
	Name string
	// Server is the simulated cloud account, the ground truth; several
	// clusters may share one.
	Server *simcloud.Server
	// Ground replaces Server as the ground truth when Server is nil: another
	// simulated cloud (providers/aws's EC2 simulator) seen through what the
	// cluster needs from it.
	Ground GroundTruth
	// StatusPeriod is --node-status-update-frequency (0: the default).
	StatusPeriod time.Duration
	// NoRoutes leaves the route controller out (--configure-cloud-routes=false,
	// as the AWS CCM is deployed: the VPC CNI routes pods).
	NoRoutes bool
	// NoLifecycle leaves the node lifecycle controller out (the scale
	// scenario: with every node Ready it makes no cloud call, and its
	// per-period copy of every Node dominates the simulator's CPU at
	// tens of thousands of nodes).
	NoLifecycle bool
	// CloudInit makes Start initialise the cloud as the CCM does: a client
	// builder on the cluster's API server (the AWS provider's Initialize
	// calls the kube API) and SetInformers for a cloudprovider.InformerUser.
	// Off, Initialize gets a nil builder and no informers.
	CloudInit bool
	// Cloud is the provider the controllers call (a bare client or
	// cloudgate over one).
	Cloud cloudprovider.Interface
	// TimeFactor compresses the controllers' periods and the kube client.
	TimeFactor float64
	// NodeWorkers is --concurrent-node-syncs (and status update workers);
	// ServiceWorkers --concurrent-service-syncs.
	NodeWorkers, ServiceWorkers int
	// KubeQPS and KubeBurst limit each controller's kube client.
	KubeQPS   float64
	KubeBurst int
	// ClusterCIDR holds the nodes' pod CIDRs (default 10.128.0.0/9).
	ClusterCIDR string
}

// GroundTruth is what a Cluster needs from its simulated cloud account:
// instances to create Nodes for and to check them against, routes and load
// balancers to check the controllers' work. *simcloud.Server implements it.
type GroundTruth interface {
	// AddInstances creates n running instances for cluster.
	AddInstances(n int, cluster string) ([]simcloud.Instance, error)
	InstanceByNodeName(nodeName string) (simcloud.Instance, bool)
	AddRoute(simcloud.Route) error
	Routes(cluster string) []simcloud.Route
	LoadBalancers() []simcloud.LoadBalancer
}

// ProviderIDer is implemented by a GroundTruth whose provider IDs are not
// simcloud's (initialised Nodes get ProviderIDOf(inst)).
type ProviderIDer interface {
	ProviderIDOf(simcloud.Instance) string
}

// Cluster is a fake API server with the four CCM controllers calling a
// provider through a recorder. The benchmark's own writes (nodes, services)
// go straight to the API server; the controllers' go through clients
// limited like a real CCM's.
type Cluster struct {
	cfg     ClusterConfig
	srv     GroundTruth
	kube    *fake.Clientset // unlimited: the benchmark's and the informers'
	factory informers.SharedInformerFactory
	rec     *recorder
	cidr    int

	// kubeMu guards kubeReqs: each controller client's requests by
	// "verb resource[/subresource]" (bounds count what the controllers do).
	kubeMu   sync.Mutex
	kubeReqs map[string]map[string]int64

	// nodeHandler, when set before Start, sees every Node event (chaos).
	nodeHandler cache.ResourceEventHandler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewCluster makes an empty cluster; nothing runs until Start.
func NewCluster(cfg ClusterConfig) (*Cluster, error) {
	ground := cfg.Ground
	if cfg.Server != nil {
		ground = cfg.Server
	}
	if ground == nil || cfg.Cloud == nil || cfg.Name == "" {
		return nil, fmt.Errorf("bench: ClusterConfig needs Name, Server (or Ground) and Cloud")
	}
	if cfg.ClusterCIDR == "" {
		cfg.ClusterCIDR = "10.128.0.0/9"
	}
	raiseWatchChanSize()
	c := &Cluster{cfg: cfg, srv: ground, kube: fake.NewSimpleClientset(), kubeReqs: map[string]map[string]int64{}}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.rec = newRecorder(cfg.Cloud)
	return c, nil
}

// Controller client names (KubeRequests).
const (
	ClientNode      = "node-controller"
	ClientLifecycle = "node-lifecycle-controller"
	ClientRoute     = "route-controller"
	ClientService   = "service-controller"
	ClientCloud     = "cloud-provider"
)

// KubeRequests returns the requests controller client name made since
// the last ResetKubeRequests, by "verb resource[/subresource]".
func (c *Cluster) KubeRequests(name string) map[string]int64 {
	c.kubeMu.Lock()
	defer c.kubeMu.Unlock()
	out := map[string]int64{}
	for k, v := range c.kubeReqs[name] {
		out[k] = v
	}
	return out
}

// ResetKubeRequests zeroes every client's request counts.
func (c *Cluster) ResetKubeRequests() {
	c.kubeMu.Lock()
	c.kubeReqs = map[string]map[string]int64{}
	c.kubeMu.Unlock()
}

func (c *Cluster) countKube(name string, a k8stesting.Action) {
	key := a.GetVerb() + " " + a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		key += "/" + sub
	}
	c.kubeMu.Lock()
	m := c.kubeReqs[name]
	if m == nil {
		m = map[string]int64{}
		c.kubeReqs[name] = m
	}
	m[key]++
	c.kubeMu.Unlock()
}

// controllerClient is a kube client for one controller (name: Client*):
// it shares the cluster's objects, is limited to KubeQPS with KubeBurst,
// as client-go's default token bucket limits a real CCM's, and counts its
// requests by verb.
func (c *Cluster) controllerClient(name string) kubernetes.Interface {
	cs := fake.NewSimpleClientset()
	tracker := c.kube.Tracker()
	lim := rate.NewLimiter(rate.Limit(c.cfg.KubeQPS*c.cfg.TimeFactor), c.cfg.KubeBurst)
	cs.ReactionChain = nil
	cs.WatchReactionChain = nil
	cs.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c.countKube(name, a)
		// Not handled: waits for a token, then the tracker answers. The
		// fake holds its lock while a reactor runs; client-go waits for its
		// token outside any lock, so the wait does too: otherwise callers
		// queue on a mutex, which in virtual time (a synctest bubble) is not
		// a durable block, and the clock never reaches the token. The
		// recorded actions are dropped meanwhile (nothing reads them; they
		// would grow with every request).
		cs.Unlock()
		cs.ClearActions()
		err := lim.Wait(c.ctx)
		cs.Lock()
		return false, nil, err
	})
	cs.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	cs.AddWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace(), opts)
		return err == nil, w, err
	})
	return cs
}

// clientBuilder gives the cloud (CloudInit) clients limited like a
// controller's, on the cluster's API server.
type clientBuilder struct{ c *Cluster }

func (b clientBuilder) Config(string) (*rest.Config, error) { return &rest.Config{}, nil }
func (b clientBuilder) ConfigOrDie(string) *rest.Config     { return &rest.Config{} }
func (b clientBuilder) Client(string) (kubernetes.Interface, error) {
	return b.c.controllerClient(ClientCloud), nil
}
func (b clientBuilder) ClientOrDie(string) kubernetes.Interface {
	return b.c.controllerClient(ClientCloud)
}

// nextCIDR is the next node's pod CIDR: a /24 of the cluster CIDR.
func (c *Cluster) nextCIDR() string {
	_, n, _ := net.ParseCIDR(c.cfg.ClusterCIDR)
	ip := n.IP.To4()
	i := c.cidr
	c.cidr++
	return fmt.Sprintf("%d.%d.%d.0/24", ip[0], int(ip[1])+(i/256)%128, i%256)
}

// AddNodes adds n instances to the cloud and their Nodes to the cluster,
// each with a pod CIDR: initialised (provider ID, labels, addresses; with
// withRoutes their routes are put in the cloud's table, as after an earlier
// reconciliation) or carrying the uninitialized taint.
func (c *Cluster) AddNodes(n int, initialized, withRoutes bool) ([]simcloud.Instance, error) {
	insts, err := c.srv.AddInstances(n, c.cfg.Name)
	if err != nil {
		return nil, err
	}
	for _, inst := range insts {
		node := makeNode(inst, initialized, true)
		if p, ok := c.srv.(ProviderIDer); ok && initialized {
			node.Spec.ProviderID = p.ProviderIDOf(inst)
		}
		cidr := c.nextCIDR()
		node.Spec.PodCIDR, node.Spec.PodCIDRs = cidr, []string{cidr}
		if withRoutes {
			if err := c.srv.AddRoute(simcloud.Route{Cluster: c.cfg.Name, Name: "r-" + inst.NodeName, TargetNode: inst.NodeName, DestinationCIDR: cidr}); err != nil {
				return nil, err
			}
		}
		if _, err := c.kube.CoreV1().Nodes().Create(c.ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	return insts, nil
}

func makeNode(inst simcloud.Instance, initialized, ready bool) *v1.Node {
	status := v1.ConditionTrue
	if !ready {
		status = v1.ConditionFalse
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              inst.NodeName,
			UID:               types.UID("uid-" + inst.NodeName),
			Labels:            map[string]string{v1.LabelHostname: inst.NodeName},
			CreationTimestamp: metav1.Now(),
		},
		Status: v1.NodeStatus{
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now()}},
		},
	}
	if initialized {
		n.Spec.ProviderID = inst.ProviderID()
		for k, v := range map[string]string{
			v1.LabelInstanceType: inst.Type, v1.LabelInstanceTypeStable: inst.Type,
			v1.LabelFailureDomainBetaZone: inst.Zone, v1.LabelTopologyZone: inst.Zone,
			v1.LabelFailureDomainBetaRegion: inst.Region, v1.LabelTopologyRegion: inst.Region,
		} {
			n.Labels[k] = v
		}
		n.Status.Addresses = append([]v1.NodeAddress(nil), inst.Addresses...)
	} else {
		n.Spec.Taints = []v1.Taint{{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule}}
	}
	return n
}

// AddServices creates m LoadBalancer services.
func (c *Cluster) AddServices(m int) error {
	for i := 0; i < m; i++ {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", i), Namespace: "default", UID: types.UID(fmt.Sprintf("%s-uid-%d", c.cfg.Name, i))},
			Spec: v1.ServiceSpec{
				Type: v1.ServiceTypeLoadBalancer,
				Ports: []v1.ServicePort{{
					Name: "http", Protocol: v1.ProtocolTCP, Port: 80,
					TargetPort: intstr.FromInt32(8080), NodePort: int32(30000 + i%2000),
				}},
			},
		}
		if _, err := c.kube.CoreV1().Services("default").Create(c.ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// SetReady sets a node's Ready condition.
func (c *Cluster) SetReady(name string, ready bool) error {
	n, err := c.kube.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	st := v1.ConditionTrue
	if !ready {
		st = v1.ConditionFalse
	}
	n.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: st, LastHeartbeatTime: metav1.Now()}}
	_, err = c.kube.CoreV1().Nodes().UpdateStatus(c.ctx, n, metav1.UpdateOptions{})
	return err
}

// TouchService changes a service's port, so the controller ensures its LB.
func (c *Cluster) TouchService(i int) error {
	name := fmt.Sprintf("svc-%03d", i)
	svc, err := c.kube.CoreV1().Services("default").Get(c.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	svc.Spec.Ports[0].Port++
	_, err = c.kube.CoreV1().Services("default").Update(c.ctx, svc, metav1.UpdateOptions{})
	return err
}

// Start starts the four controllers as the CCM does, with periods divided
// by the time factor; handlers (may be nil) see Node events.
func (c *Cluster) Start(handlers ...cache.ResourceEventHandler) error {
	f := c.cfg.TimeFactor
	c.factory = informers.NewSharedInformerFactory(c.kube, 0)
	if c.cfg.CloudInit {
		// cloudgate takes the node informer whatever its upstream, as the
		// registered cloudgate CCM does (SetInformers): batch calls carry
		// the Nodes about to be looked up.
		if u, ok := c.cfg.Cloud.(interface {
			UseNodeInformer(informers.SharedInformerFactory)
		}); ok {
			u.UseNodeInformer(c.factory)
		}
		if iu, ok := c.cfg.Cloud.(cloudprovider.InformerUser); ok {
			iu.SetInformers(c.factory)
		}
		c.rec.Initialize(clientBuilder{c}, c.ctx.Done())
	} else {
		c.rec.Initialize(nil, c.ctx.Done())
	}
	nodes := c.factory.Core().V1().Nodes()
	services := c.factory.Core().V1().Services()
	workers := int32(c.cfg.NodeWorkers)
	period := c.cfg.StatusPeriod
	if period == 0 {
		period = nodeStatusUpdateFrequency
	}
	nc, err := nodecontroller.NewCloudNodeController(nodes, c.controllerClient(ClientNode), c.rec, scale(period, f), workers, workers)
	if err != nil {
		return err
	}
	var lc *nodelifecycle.CloudNodeLifecycleController
	if !c.cfg.NoLifecycle {
		if lc, err = nodelifecycle.NewCloudNodeLifecycleController(nodes, c.controllerClient(ClientLifecycle), c.rec, scale(nodeMonitorPeriod, f), 1); err != nil {
			return err
		}
	}
	var rc *route.RouteController
	if !c.cfg.NoRoutes {
		routes, _ := c.rec.Routes()
		_, cidr, err := net.ParseCIDR(c.cfg.ClusterCIDR)
		if err != nil {
			return err
		}
		if rc, err = route.New(routes, c.controllerClient(ClientRoute), nodes, c.cfg.Name, []*net.IPNet{cidr}); err != nil {
			return err
		}
	}
	sc, err := service.New(c.rec, c.controllerClient(ClientService), services, nodes, c.cfg.Name, utilfeature.DefaultFeatureGate)
	if err != nil {
		return err
	}
	for _, h := range append(handlers, c.nodeHandler) {
		if h == nil {
			continue
		}
		if _, err := nodes.Informer().AddEventHandler(h); err != nil {
			return err
		}
	}
	c.factory.Start(c.ctx.Done())
	c.factory.WaitForCacheSync(c.ctx.Done())
	cm := controllersmetrics.NewControllerManagerMetrics("cloudgate-bench")
	run := func(fn func()) {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); fn() }()
	}
	run(func() { nc.RunWithContext(c.ctx, cm) })
	if lc != nil {
		run(func() { lc.Run(c.ctx, cm) })
	}
	if rc != nil {
		run(func() { rc.Run(c.ctx, scale(routeReconcilePeriod, f), cm) })
	}
	run(func() { sc.Run(c.ctx, c.cfg.ServiceWorkers, cm) })
	return nil
}

// Stop stops the controllers (not the cloud: it may be shared).
func (c *Cluster) Stop() {
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	if c.factory != nil {
		c.factory.Shutdown()
	}
}

// Quiescence is which of the conditions of a settled cluster hold.
type Quiescence struct {
	NodesInitialized bool // every Node is initialised: no uninitialized taint, addresses set
	LBsCurrent       bool // every service's LB holds the current node set and port
	RoutesMatch      bool // one route per node with a pod CIDR, none for a gone node
	NoneWaiting      bool // no controller call in flight for over a simulated second
	NodesGone        bool // no Node without an instance (churn, chaos)
}

// All reports whether every condition holds.
func (q Quiescence) All() bool {
	return q.NodesInitialized && q.LBsCurrent && q.RoutesMatch && q.NoneWaiting && q.NodesGone
}

// Quiescence checks the conditions against the API server and the cloud.
func (c *Cluster) Quiescence() (Quiescence, error) { return c.QuiescenceExcept(nil) }

// QuiescenceExcept is Quiescence with the Nodes for which excused is true
// left out of every condition: their Node may or may not exist, and a
// route or LB host for them may or may not be there (the chaos scenario
// excuses a removed instance's Node that cloudgate's not-found guard holds
// until its deletion is due). excused nil excuses none.
func (c *Cluster) QuiescenceExcept(excused func(node string) bool) (Quiescence, error) {
	if excused == nil {
		excused = func(string) bool { return false }
	}
	q := Quiescence{NodesInitialized: true, RoutesMatch: true, LBsCurrent: true, NodesGone: true}
	nodes, err := c.kube.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return q, err
	}
	want := map[string]string{} // node -> pod CIDR
	var lbNodes []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if excused(n.Name) {
			continue
		}
		if !initialized(n) {
			q.NodesInitialized = false
		}
		if _, ok := c.srv.InstanceByNodeName(n.Name); !ok {
			q.NodesGone = false
		}
		if n.Spec.PodCIDR != "" {
			want[n.Name] = n.Spec.PodCIDR
		}
		if n.DeletionTimestamp == nil {
			if _, excluded := n.Labels[v1.LabelNodeExcludeBalancers]; !excluded {
				lbNodes = append(lbNodes, n.Name)
			}
		}
	}
	sort.Strings(lbNodes)
	got := map[string]string{}
	for _, r := range c.srv.Routes(c.cfg.Name) {
		if excused(r.TargetNode) {
			continue
		}
		if cidr, ok := want[r.TargetNode]; !ok || cidr != r.DestinationCIDR {
			q.RoutesMatch = false
		}
		got[r.TargetNode] = r.DestinationCIDR
	}
	if len(got) != len(want) && !c.cfg.NoRoutes { // no route controller: no routes wanted
		q.RoutesMatch = false
	}
	lbs := map[string]simcloud.LoadBalancer{}
	for _, lb := range c.srv.LoadBalancers() {
		lbs[lb.Name] = lb
	}
	svcs, err := c.kube.CoreV1().Services("default").List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return q, err
	}
	for i := range svcs.Items {
		svc := &svcs.Items[i]
		lb, ok := lbs[cloudprovider.DefaultLoadBalancerName(svc)]
		hosts := lb.Hosts
		if ok {
			hosts = slices.DeleteFunc(slices.Clone(hosts), excused)
		}
		if !ok || len(lb.Ports) == 0 || lb.Ports[0].Port != svc.Spec.Ports[0].Port || !slices.Equal(hosts, lbNodes) {
			q.LBsCurrent = false
			break
		}
	}
	q.NoneWaiting = c.rec.oldestInflight() <= scale(time.Second, c.cfg.TimeFactor)
	return q, nil
}

// countInitialized counts the named nodes that exist and are initialised.
func (c *Cluster) countInitialized(names []string) int {
	n := 0
	for _, name := range names {
		node, err := c.kube.CoreV1().Nodes().Get(c.ctx, name, metav1.GetOptions{})
		if err == nil && initialized(node) {
			n++
		}
	}
	return n
}

// initialized: the node controller removed the uninitialized taint and
// set the node's addresses (an update and a status patch).
func initialized(n *v1.Node) bool { return !tainted(n) && len(n.Status.Addresses) > 0 }

func tainted(n *v1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}

// Nodes lists the cluster's Nodes from the API server.
func (c *Cluster) Nodes() ([]v1.Node, error) {
	l, err := c.kube.CoreV1().Nodes().List(c.ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}
