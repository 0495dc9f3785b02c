//go:build linux

package real

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

const (
	clusterName = "kubernetes" // the CCM's --cluster-name default
	region      = "us-east-1"
	vpcID       = "vpc-0bench"
	nodeGroup   = "sg-0nodes"
	describe    = "DescribeInstances"
	// The CCM's access key (setAWSEnv) and the neighbour tenant's, both of
	// one account.
	ccmAccessKey       = ec2sim.AccessKeyID
	neighbourAccessKey = "AKIDNEIGHBOUR"
	account            = "123456789012"
	// sampleEvery is how often the sampler reads ec2sim's counters (the
	// peak share is the busiest minute of these samples).
	sampleEvery = 5 * time.Second
)

var zones = []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}}

// world is one column's cluster: its own etcd + kube-apiserver, ec2sim
// account and CCM process.
type world struct {
	t    *testing.T
	o    *Options
	col  column
	dir  string
	cp   *e2e.ControlPlane
	kube kubernetes.Interface // the harness's own client (fast, not the CCM's)
	sim  *ec2sim.Server
	ccm  *e2e.Process

	https  *http.Client
	ccmURL string

	mu       sync.Mutex
	next     int      // the next instance number
	live     []string // Ready nodes that may leave (churn), oldest first
	ids      map[string]string
	inst     map[string]ec2sim.Instance // by Node name, as last Put
	gone     map[string]bool            // Nodes whose instance was terminated
	joined   map[string]time.Time       // Nodes registered after populate, when
	samples  []sample
	churnErr error
	// onChurn, when set, is told of each churn event (the scenarios time
	// load balancer convergence from it).
	onChurn func(at time.Time)
}

// sample is ec2sim's counters at one instant.
type sample struct {
	at    time.Time
	stats map[string]ec2sim.ActionStats
}

func newWorld(ctx context.Context, t *testing.T, o *Options, col column, etcdBin, apiserverBin string) *world {
	w := &world{t: t, o: o, col: col, dir: t.TempDir(), ids: map[string]string{},
		inst: map[string]ec2sim.Instance{}, gone: map[string]bool{}, joined: map[string]time.Time{}}
	w.cp = e2e.StartControlPlane(ctx, t, w.dir, etcdBin, apiserverBin)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: w.cp.URL, BearerToken: w.cp.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{CAFile: w.cp.CAFile}, QPS: 2000, Burst: 2000})
	if err != nil {
		t.Fatal(err)
	}
	w.kube = kube
	var subnets []ec2sim.Subnet
	for i, z := range zones {
		subnets = append(subnets, ec2sim.Subnet{ID: fmt.Sprintf("subnet-0bench%d", i), VPCID: vpcID, Zone: z.Name,
			CIDR: fmt.Sprintf("10.%d.0.0/16", i+1), Tags: map[string]string{"kubernetes.io/cluster/" + clusterName: "owned"}})
	}
	w.sim, err = ec2sim.Start(ec2sim.Config{
		Region: region, Zones: zones, Topology: true, Subnets: subnets,
		Default: o.Bucket, Buckets: o.Buckets,
		SecurityGroups: []ec2sim.SecurityGroup{{ID: nodeGroup, Name: "nodes", Description: "cluster nodes", VPCID: vpcID,
			Tags: map[string]string{"kubernetes.io/cluster/" + clusterName: "owned"}}},
		RouteTables: []ec2sim.RouteTable{{ID: "rtb-0bench", VPCID: vpcID, Main: true, Routes: []ec2sim.Route{
			{DestinationCIDR: "10.0.0.0/8", GatewayID: "local"}, {DestinationCIDR: "0.0.0.0/0", GatewayID: "igw-0bench"}}}},
		Latency: ec2sim.Latency{Default: ec2sim.ActionLatency{Base: o.Latency, Jitter: o.Jitter}, Seed: uint64(o.Seed)},
		// The CCM and the neighbour tenant are two principals of one
		// account: they draw from the same buckets.
		Accounts: map[string]string{ccmAccessKey: account, neighbourAccessKey: account},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.sim.Close() })
	return w
}

// instance makes the next instance: running, in the cluster's node group,
// zones in turn; its Node's name is its private DNS name, as the AWS
// provider names Nodes.
func (w *world) instance() (ec2sim.Instance, string) {
	w.mu.Lock()
	i := w.next
	w.next++
	w.mu.Unlock()
	z := i % len(zones)
	ip := fmt.Sprintf("10.%d.%d.%d", z+1, (i/250)%250, i%250+1)
	dns := "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal"
	id := fmt.Sprintf("i-%017x", 0x1000+i)
	return ec2sim.Instance{ID: id, Type: "m5.large", Zone: zones[z].Name, PrivateDNSName: dns, PrivateIP: ip,
		VPCID: vpcID, SubnetID: fmt.Sprintf("subnet-0bench%d", z), SecurityGroupIDs: []string{nodeGroup},
		Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{ip}}},
		Tags:       map[string]string{"kubernetes.io/cluster/" + clusterName: "owned"}}, dns
}

// initializedNode is a Node the CCM initialised earlier: provider ID,
// labels and addresses as the AWS provider reports them.
func initializedNode(in ec2sim.Instance, name string) *corev1.Node {
	zone := in.Zone
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelInstanceType: in.Type, corev1.LabelInstanceTypeStable: in.Type,
			corev1.LabelFailureDomainBetaZone: zone, corev1.LabelTopologyZone: zone,
			corev1.LabelFailureDomainBetaRegion: region, corev1.LabelTopologyRegion: region,
		}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///" + zone + "/" + in.ID},
	}
	n.Status.Addresses = []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: in.PrivateIP},
		{Type: corev1.NodeInternalDNS, Address: name},
		{Type: corev1.NodeHostName, Address: name},
	}
	return n
}

// populate creates the steady cluster: n instances and their initialised
// Nodes, NotReadyPct of them NotReady (held so: no kubelet reports
// otherwise), and the LoadBalancer Services.
func (w *world) populate(ctx context.Context, n int) {
	notReady := int(math.Round(float64(n) * w.o.NotReadyPct / 100))
	var nodes []*corev1.Node
	var ready []corev1.ConditionStatus
	for i := range n {
		in, name := w.instance()
		w.sim.Put(in)
		nodes = append(nodes, initializedNode(in, name))
		st := corev1.ConditionTrue
		// Spread the NotReady ones over the cluster.
		if notReady > 0 && i%(n/notReady) == 0 && countStatus(ready, corev1.ConditionFalse) < notReady {
			st = corev1.ConditionFalse
		} else {
			w.live = append(w.live, name)
		}
		w.ids[name] = in.ID
		w.inst[name] = in
		ready = append(ready, st)
	}
	w.createNodes(ctx, nodes, ready)
	for i := range w.o.Services {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("lb-%02d", i), Namespace: "default"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster,
				Selector:              map[string]string{"app": fmt.Sprintf("web-%02d", i)},
				Ports:                 []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		if i < w.o.NLBServices {
			svc.Annotations = map[string]string{"service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}
		}
		if _, err := w.kube.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			w.t.Fatalf("creating Service %s: %v", svc.Name, err)
		}
	}
}

func countStatus(s []corev1.ConditionStatus, v corev1.ConditionStatus) int {
	c := 0
	for _, x := range s {
		if x == v {
			c++
		}
	}
	return c
}

// createNodes creates the Nodes with 16 clients in parallel and sets each
// one's status (its Ready condition, and the addresses of an initialised
// one): a Create ignores the status.
func (w *world) createNodes(ctx context.Context, nodes []*corev1.Node, ready []corev1.ConditionStatus) {
	if err := createNodes(ctx, w.kube, nodes, ready); err != nil {
		w.t.Fatal(err)
	}
}

func createNodes(ctx context.Context, c kubernetes.Interface, nodes []*corev1.Node, ready []corev1.ConditionStatus) error {
	type job struct {
		n  *corev1.Node
		st corev1.ConditionStatus
	}
	work := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for j := range work {
				st := j.n.Status
				_, err := c.CoreV1().Nodes().Create(ctx, j.n, metav1.CreateOptions{})
				if err == nil {
					now := metav1.Now()
					st.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: j.st, Reason: "BenchRealAWS", LastHeartbeatTime: now, LastTransitionTime: now}}
					var patch []byte
					if patch, err = json.Marshal(map[string]any{"status": st}); err == nil {
						// A patch: the CCM may change the Node meanwhile.
						_, err = c.CoreV1().Nodes().Patch(ctx, j.n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
					}
				}
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("node %s: %w", j.n.Name, err)
					}
					mu.Unlock()
				}
			}
		})
	}
	for i, n := range nodes {
		work <- job{n, ready[i]}
	}
	close(work)
	wg.Wait()
	return firstErr
}

// startCCM starts the column's CCM binary with its arguments, the way its
// chart runs it, plus what a process outside a Pod needs (kubeconfigs, a
// free secure port on 127.0.0.1).
func (w *world) startCCM(ctx context.Context) {
	t := w.t
	cloudConf := filepath.Join(w.dir, "cloud.conf")
	e2e.WriteFile(t, cloudConf, awsCloudConfig(w.sim.URL))
	args := slices.Clone(w.col.args)
	if w.col.cloudgate {
		cfg := filepath.Join(w.dir, "cloudgate.yaml")
		e2e.WriteFile(t, cfg, strings.ReplaceAll(w.col.config, chartUpstreamConfig, cloudConf))
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, chartConfigPath, cfg)
		}
	} else {
		args = append(args, "--cloud-config="+cloudConf)
	}
	kubeconfig := filepath.Join(w.dir, "ccm.kubeconfig")
	w.cp.Kubeconfig(t, kubeconfig, w.cp.AdminToken)
	port := e2e.FreePort(t)
	// The columns' CCMs run side by side on 127.0.0.1: each on a free secure port, and no
	// /readyz listener (the chart's fixed port would clash; nothing probes it here).
	args = slices.DeleteFunc(args, func(a string) bool {
		return strings.HasPrefix(a, "--secure-port=") || strings.HasPrefix(a, "--readyz-bind-address=")
	})
	args = append(args, "--kubeconfig="+kubeconfig,
		"--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port))
	if w.o.StatusPeriod != 0 {
		args = append(args, "--node-status-update-frequency="+w.o.StatusPeriod.String())
	}
	t.Logf("%s: %s %s", w.col.name, filepath.Base(w.col.bin), strings.Join(args, " "))
	w.ccm = e2e.StartProcess(t, w.dir, "ccm", w.col.bin, args...)
	w.https, w.ccmURL = w.ccm.WaitServing(ctx, t, port, w.cp.AdminToken, 3*time.Minute)
}

// awsCloudConfig is the AWS provider's cloud.conf: the cluster's VPC, and
// EC2, ELB and ELBv2 pointed at ec2sim (an action it does not know fails
// there, it never reaches AWS).
func awsCloudConfig(url string) string {
	conf := fmt.Sprintf("[Global]\nZone = us-east-1a\nVPC = %s\nSubnetID = subnet-0bench0\nKubernetesClusterID = %s\n", vpcID, clusterName)
	for i, svc := range [][2]string{{"EC2", "ec2"}, {"Elastic Load Balancing", "elasticloadbalancing"}, {"Elastic Load Balancing v2", "elasticloadbalancing"}} {
		conf += fmt.Sprintf("\n[ServiceOverride %q]\nService = %s\nRegion = %s\nURL = %s\nSigningRegion = %s\nSigningName = %s\n",
			strconv.Itoa(i+1), svc[0], region, url, region, svc[1])
	}
	return conf
}

// sampler records ec2sim's counters every sampleEvery until ctx ends.
func (w *world) sampler(ctx context.Context) {
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		s := sample{at: time.Now(), stats: w.sim.AllStats()}
		w.mu.Lock()
		w.samples = append(w.samples, s)
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// churn replaces Churn Nodes every ChurnEvery until ctx ends: Churn new
// instances join (an uninitialised Node each, Ready, as its kubelet
// registers it) and the Churn oldest Ready Nodes leave (their instances
// terminated and the Nodes NotReady, as a scale-down leaves them, so the
// CCM's lifecycle controller deletes them).
func (w *world) churn(ctx context.Context) {
	if w.o.Churn == 0 {
		return
	}
	tick := time.NewTicker(w.o.ChurnEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		// A step, once begun, completes even when ctx ends during it: a leaving Node whose
		// instance is terminated but which stays Ready is never checked by the lifecycle
		// controller, and would stay behind in every column.
		step, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		w.churnStep(step)
		cancel()
	}
}

// churnStep is one step of churn: Churn Nodes join, the Churn oldest Ready Nodes leave.
func (w *world) churnStep(ctx context.Context) {
	if err := w.join(ctx, w.o.Churn, true); err != nil {
		w.fail(err)
		return
	}
	w.mu.Lock()
	k := min(w.o.Churn, len(w.live))
	leaving := slices.Clone(w.live[:k])
	w.live = w.live[k:]
	w.mu.Unlock()
	for _, name := range leaving {
		w.mu.Lock()
		w.gone[name] = true
		w.mu.Unlock()
		w.sim.SetState(w.ids[name], ec2sim.StateTerminated)
		if err := setReady(ctx, w.kube, name, corev1.ConditionUnknown); err != nil && !apierrors.IsNotFound(err) {
			w.fail(err)
			return
		}
	}
	if w.onChurn != nil {
		w.onChurn(time.Now())
	}
}

func (w *world) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.churnErr == nil && !errorsIsCanceled(err) {
		w.churnErr = err
	}
}

func errorsIsCanceled(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "context canceled") || strings.Contains(err.Error(), "context deadline exceeded"))
}

// join adds k instances and their uninitialised Nodes at once and returns
// their names; churn=true makes them candidates to leave later.
func (w *world) join(ctx context.Context, k int, churn bool) error {
	_, err := w.joinNames(ctx, k, churn)
	return err
}

func (w *world) joinNames(ctx context.Context, k int, churn bool) ([]string, error) {
	var nodes []*corev1.Node
	var ready []corev1.ConditionStatus
	var names []string
	// With a launch lag EC2 does not describe the new instances at first,
	// and their kubelets register them NotReady until the network is up
	// (taken to be when EC2 shows the instance).
	lag := w.o.LaunchLag
	st := corev1.ConditionTrue
	if lag > 0 {
		st = corev1.ConditionFalse
	}
	now := time.Now()
	for range k {
		in, name := w.instance()
		w.sim.Launch(lag, in)
		n := e2e.UninitializedNode(name)
		n.Labels = map[string]string{corev1.LabelHostname: name}
		nodes = append(nodes, n)
		ready = append(ready, st)
		names = append(names, name)
		w.mu.Lock()
		w.ids[name] = in.ID
		w.inst[name] = in
		w.joined[name] = now
		w.mu.Unlock()
	}
	if err := createNodes(ctx, w.kube, nodes, ready); err != nil {
		return nil, err
	}
	if lag > 0 {
		// Not the caller's context: the churn's ends before these Nodes
		// are Ready, and their kubelets outlive it.
		readyCtx := context.WithoutCancel(ctx)
		time.AfterFunc(lag, func() {
			for _, name := range names {
				// A deleted Node stays so: its kubelet does not register it again.
				if err := setReady(readyCtx, w.kube, name, corev1.ConditionTrue); err != nil && !apierrors.IsNotFound(err) {
					w.fail(err)
				}
			}
		})
	}
	if churn {
		w.mu.Lock()
		w.live = append(w.live, names...)
		w.mu.Unlock()
	}
	return names, nil
}

func setReady(ctx context.Context, c kubernetes.Interface, name string, st corev1.ConditionStatus) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":%q,"reason":"BenchRealAWS","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`, st, now, now)
	_, err := c.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

// initialised waits until every named Node has a provider ID, addresses
// and no uninitialized taint, and returns how long that took from since.
func (w *world) initialised(ctx context.Context, names []string, since time.Time, timeout time.Duration) (float64, error) {
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	err := e2e.Poll(ctx, "Nodes initialised", 250*time.Millisecond, timeout, func() (bool, error) {
		list, err := w.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			nd := &list.Items[i]
			if pending[nd.Name] && nd.Spec.ProviderID != "" && !hasTaint(nd, e2e.UninitializedTaint) && len(nd.Status.Addresses) > 0 {
				delete(pending, nd.Name)
			}
		}
		return len(pending) == 0, fmt.Errorf("%d of %d not initialised", len(pending), len(names))
	})
	return time.Since(since).Seconds(), err
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, tn := range n.Spec.Taints {
		if tn.Key == key {
			return true
		}
	}
	return false
}

// ingressed counts the LoadBalancer Services with an ingress address.
func (w *world) ingressed(ctx context.Context) (int, error) {
	list, err := w.kube.CoreV1().Services("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer && len(s.Status.LoadBalancer.Ingress) > 0 {
			n++
		}
	}
	return n, nil
}

// metrics scrapes the CCM's /metrics.
func (w *world) metrics() ([]e2e.Sample, error) {
	code, body, err := e2e.Get(w.https, w.ccmURL+"/metrics", w.cp.AdminToken)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d: %.200s", code, body)
	}
	return e2e.ParseMetrics(body)
}

// rss is the CCM's resident set size in bytes (/proc/PID/status VmRSS).
func (w *world) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", w.ccm.Pid()))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return -1
}
