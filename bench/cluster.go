package bench

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	"k8s.io/cloud-provider/controllers/nodelifecycle"
	"k8s.io/cloud-provider/controllers/route"
	"k8s.io/cloud-provider/controllers/service"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	_ "k8s.io/controller-manager/pkg/features/register" // registers the gates the route controller reads

	"github.com/cloudgate/cloudgate/bench/simcloud"
	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
)

// CCM defaults (k8s.io/cloud-provider v0.37.2), before time compression.
const (
	nodeStatusUpdateFrequency = 5 * time.Minute
	nodeMonitorPeriod         = 5 * time.Second
	routeReconcilePeriod      = 10 * time.Second
	clusterName               = "kubernetes"
)

var chanSizeOnce sync.Once

// raiseWatchChanSize lets the fake clientset's watches hold thousands of
// events: its watcher panics when its channel (100 events by default) is full.
func raiseWatchChanSize() {
	chanSizeOnce.Do(func() { watch.DefaultChanSize = 1 << 20 })
}

// cluster is one side (bare or cloudgate) of one scenario: a simulated
// cloud, a fake API server, the four CCM controllers and the provider
// they call through the recorder.
type cluster struct {
	opts    *Options
	side    string
	srv     *simcloud.Server
	kube    kubernetes.Interface
	factory informers.SharedInformerFactory
	rec     *recorder
	client  *simcloud.Cloud
	reg     *prometheus.Registry // cloudgate side only

	// onExists and nodeHandler, when set before start, see every
	// InstanceExists answer and every Node event (chaos).
	onExists    func(node *v1.Node, exists bool, err error)
	nodeHandler cache.ResourceEventHandler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newCluster starts a simulated cloud with the options' quota. Nothing runs
// until start.
func newCluster(opts *Options, side string, faults simcloud.Faults) (*cluster, error) {
	raiseWatchChanSize()
	f := opts.TimeFactor
	srv, err := simcloud.NewServer(simcloud.ServerConfig{
		Seed:       opts.Seed,
		ReadQPS:    opts.ReadQPS * f,
		ReadBurst:  opts.ReadBurst,
		WriteQPS:   opts.WriteQPS * f,
		WriteBurst: opts.WriteBurst,
		Faults:     faults,
		// An injected hang lasts until the client's timeout ends it.
		HangTimeout: opts.clientTimeout() + time.Second,
	})
	if err != nil {
		return nil, err
	}
	c := &cluster{opts: opts, side: side, srv: srv, kube: fake.NewSimpleClientset()}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// addNodes adds n instances to the cloud and their Node objects to the
// cluster: initialised (provider ID, labels, addresses) or carrying the
// uninitialized taint. withCIDR gives each node a pod CIDR (routes).
func (c *cluster) addNodes(n int, prefix string, initialized, withCIDR bool) ([]simcloud.Instance, error) {
	insts, err := c.srv.AddInstances(n, prefix)
	if err != nil {
		return nil, err
	}
	for _, inst := range insts {
		node := makeNode(inst, initialized, true)
		if withCIDR {
			a := nextCIDR()
			node.Spec.PodCIDR = a
			node.Spec.PodCIDRs = []string{a}
		}
		if _, err := c.kube.CoreV1().Nodes().Create(c.ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	return insts, nil
}

var (
	cidrMu   sync.Mutex
	cidrNext int
)

func nextCIDR() string {
	cidrMu.Lock()
	defer cidrMu.Unlock()
	i := cidrNext
	cidrNext++
	return fmt.Sprintf("10.%d.%d.0/24", 128+(i/256)%128, i%256)
}

func makeNode(inst simcloud.Instance, initialized, ready bool) *v1.Node {
	status := v1.ConditionTrue
	if !ready {
		status = v1.ConditionFalse
	}
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:              inst.NodeName,
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

// addServices creates m LoadBalancer services.
func (c *cluster) addServices(m int) error {
	for i := 0; i < m; i++ {
		svc := &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("svc-%03d", i), Namespace: "default", UID: types.UID(fmt.Sprint("uid-", i))},
			Spec: v1.ServiceSpec{
				Type: v1.ServiceTypeLoadBalancer,
				Ports: []v1.ServicePort{{
					Name: "http", Protocol: v1.ProtocolTCP, Port: 80,
					TargetPort: intstr.FromInt32(8080), NodePort: int32(30000 + i),
				}},
			},
		}
		if _, err := c.kube.CoreV1().Services("default").Create(c.ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// start builds the provider (bare, or cloudgate over it), the recorder and
// the controllers, as the CCM does, with periods divided by the time factor.
func (c *cluster) start(w *initWatch) error {
	f := c.opts.TimeFactor
	client, err := simcloud.NewClient(simcloud.ClientConfig{
		Endpoint: c.srv.URL(), APIKey: "bench", ClusterName: clusterName, Timeout: c.opts.clientTimeout(),
	})
	if err != nil {
		return err
	}
	c.client = client
	var cloud cloudprovider.Interface = client
	if c.side == sideCloudgate {
		cfg, err := c.opts.cloudgateConfig()
		if err != nil {
			return err
		}
		m := metrics.New()
		c.reg = prometheus.NewRegistry()
		if err := m.Register(c.reg); err != nil {
			return err
		}
		cfg.Metrics = m
		if cloud, err = provider.New(client, cfg); err != nil {
			return err
		}
		if c.opts.onRegistry != nil {
			c.opts.onRegistry(c.reg)
		}
	}
	c.rec = newRecorder(cloud)
	c.rec.onExists = c.onExists
	c.rec.Initialize(nil, c.ctx.Done())

	c.factory = informers.NewSharedInformerFactory(c.kube, 0)
	nodes := c.factory.Core().V1().Nodes()
	services := c.factory.Core().V1().Services()
	workers := int32(c.opts.NodeWorkers)
	nc, err := nodecontroller.NewCloudNodeController(nodes, c.kube, c.rec, scale(nodeStatusUpdateFrequency, f), workers, workers)
	if err != nil {
		return err
	}
	lc, err := nodelifecycle.NewCloudNodeLifecycleController(nodes, c.kube, c.rec, scale(nodeMonitorPeriod, f), 1)
	if err != nil {
		return err
	}
	routes, _ := c.rec.Routes()
	_, cidr, _ := net.ParseCIDR("10.128.0.0/9")
	rc, err := route.New(routes, c.kube, nodes, clusterName, []*net.IPNet{cidr})
	if err != nil {
		return err
	}
	sc, err := service.New(c.rec, c.kube, services, nodes, clusterName, utilfeature.DefaultFeatureGate)
	if err != nil {
		return err
	}
	if w != nil {
		if _, err := nodes.Informer().AddEventHandler(w.handler()); err != nil {
			return err
		}
	}
	if c.nodeHandler != nil {
		if _, err := nodes.Informer().AddEventHandler(c.nodeHandler); err != nil {
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
	run(func() { lc.Run(c.ctx, cm) })
	run(func() { rc.Run(c.ctx, scale(routeReconcilePeriod, f), cm) })
	run(func() { sc.Run(c.ctx, c.opts.ServiceWorkers, cm) })
	return nil
}

// stop stops the controllers and the cloud.
func (c *cluster) stop() {
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
	c.factory.Shutdown()
	if c.client != nil {
		c.client.Close()
	}
	c.srv.Close()
}

// initialized counts the nodes without the uninitialized taint among names.
func (c *cluster) initialized(names map[string]bool) int {
	lister := c.factory.Core().V1().Nodes().Lister()
	n := 0
	for name := range names {
		node, err := lister.Get(name)
		if err != nil {
			continue
		}
		tainted := false
		for _, t := range node.Spec.Taints {
			if t.Key == cloudproviderapi.TaintExternalCloudProvider {
				tainted = true
			}
		}
		if !tainted {
			n++
		}
	}
	return n
}

func scale(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) / f)
}
