// Command aws-bench measures the AWS provider with and without cloudgate against the
// simulated EC2 (ec2sim, with EC2's documented per-action token buckets), driven by the real
// cloud-node controller (k8s.io/cloud-provider v0.37.2) on a fake API server.
//
// -mode scaleup: K new nodes, registered without provider IDs and named by their instances'
// private DNS names as kubelets do, are initialized. -mode steady: K nodes already
// initialized; the controller's periodic status sync (--node-status-update-frequency 5m, its
// first round at start) runs for -window, and the EC2 calls are counted. Sides:
//
//	aws                  the unmodified AWS provider alone
//	aws+cloudgate        cloudgate in front of it (cache, limiter; no batch interface)
//	aws-batch+cloudgate  cloudgate in front of the provider with the awsbatch adapter
//	aws-batch+cloudgate+list  the same with list prefetch (batch.listPrefetch)
//
// -mode table: the measured comparison (package awsbench: bench's cluster,
// controllers and bound; columns aws, aws+cloudgate, aws+cloudgate+adapter; steady state at
// -sizes, a -scaleup-nodes scale-up; several seeds) as markdown on stdout, progress on stderr.
// -latency/-jitter/-latency-per-item give ec2sim a service time per answer; -parallel runs the
// columns side by side; -cycles K measures each steady column over K whole status cycles (the
// hour measured, not derived; the previous derivation from -derive-window printed beside it);
// -hour D also counts each column over D of real time after -hour-warmup, next to the cycles'
// figures; -sizes-parallel runs every size's columns side by side too.
//
// It reports, per side, the time until every node is initialized (scaleup) or the length of
// the window (steady), the DescribeInstances calls EC2 received and how many it answered
// RequestLimitExceeded. Everything runs in real time (no time compression).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	cloudproviderapi "k8s.io/cloud-provider/api"
	nodecontroller "k8s.io/cloud-provider/controllers/node"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"
	"k8s.io/klog/v2"

	"github.com/cloudgate/cloudgate/metrics"
	"github.com/cloudgate/cloudgate/provider"
	"github.com/cloudgate/cloudgate/providers/aws/awsbatch"
	"github.com/cloudgate/cloudgate/providers/aws/awsbench"
	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
)

func main() {
	nodes := flag.Int("nodes", 1000, "new nodes (and instances) in the scale-up")
	workers := flag.Int("workers", 1, "--concurrent-node-syncs of the cloud-node controller (CCM default 1)")
	bucket := flag.Int("bucket", ec2sim.NonMutatingBucket.Size, "EC2 token bucket size per action")
	refill := flag.Float64("refill", ec2sim.NonMutatingBucket.Refill, "EC2 token refill per second per action")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up on a side after this long")
	sides := flag.String("sides", "aws,aws+cloudgate,aws-batch+cloudgate", "sides to run, comma-separated")
	mode := flag.String("mode", "scaleup", "scaleup, steady or table")
	def := awsbench.DefaultOptions()
	sizes := flag.String("sizes", "1000,5000,20000", "table: steady node counts, comma-separated")
	seeds := flag.Int("seeds", def.Seeds, "table: seeds per size and for the scale-up")
	largeSeeds := flag.Int("large-seeds", def.LargeSeeds, "table: seeds for sizes >= -large-from")
	largeFrom := flag.Int("large-from", def.LargeFrom, "table: sizes from this many nodes run -large-seeds seeds")
	columns := flag.String("columns", strings.Join(awsbench.AllColumns, ","), "table: columns, comma-separated")
	tableWindow := flag.Duration("table-window", def.Window, "table: the steady window (real time)")
	scaleupNodes := flag.Int("scaleup-nodes", def.ScaleupNodes, "table: nodes of the scale-up (0: none)")
	window := flag.Duration("window", 150*time.Second, "steady: how long to count")
	latency := flag.Duration("latency", 0, "table: ec2sim's base latency of every answer (an assumption: AWS publishes none)")
	jitter := flag.Duration("jitter", 0, "table: plus a uniform draw from [0, jitter), seeded by the run's seed")
	perItem := flag.Duration("latency-per-item", 0, "table: plus this much per instance a successful answer returns")
	parallel := flag.Bool("parallel", false, "table: run the columns side by side, each on its own simulated account and cluster")
	cycles := flag.Int("cycles", 0, "table: count each steady column over this many whole status cycles (needs -parallel; -table-window then caps the run); 0: over -table-window")
	deriveWindow := flag.Duration("derive-window", 20*time.Second, "table, -cycles: also derive the hour from this first part of the window (the previous method), for comparison")
	hour := flag.Duration("hour", 0, "table, -cycles: also count each steady column over this real-time window after -hour-warmup, next to the cycles' derivation (the run then lasts -hour-warmup + -hour; -table-window is not used); 0: off")
	warmup := flag.Duration("hour-warmup", 10*time.Minute, "table, -hour: the measured window starts this long after each column's start")
	sizesParallel := flag.Bool("sizes-parallel", false, "table, -parallel: run the steady groups of every size side by side too (3 worlds per size)")
	klog.InitFlags(nil)
	_ = flag.Set("v", "0")
	_ = flag.Set("logtostderr", "false")
	_ = flag.Set("stderrthreshold", "FATAL")
	flag.Parse()

	// Static credentials, no instance-metadata service: the provider reaches ec2sim
	// through its own [ServiceOverride].
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": ec2sim.AccessKeyID, "AWS_SECRET_ACCESS_KEY": ec2sim.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		os.Setenv(k, v)
	}
	if *mode == "table" {
		o := def
		o.Seeds, o.LargeSeeds, o.LargeFrom, o.Window, o.ScaleupNodes = *seeds, *largeSeeds, *largeFrom, *tableWindow, *scaleupNodes
		o.Bucket = ec2sim.Bucket{Size: *bucket, Refill: *refill}
		o.Latency = ec2sim.Latency{Default: ec2sim.ActionLatency{Base: *latency, Jitter: *jitter, PerItem: *perItem}}
		o.Parallel, o.Cycles, o.DeriveWindow = *parallel, *cycles, *deriveWindow
		o.Hour, o.Warmup, o.SizesParallel = *hour, *warmup, *sizesParallel
		o.Columns = strings.Split(*columns, ",")
		o.Sizes = nil
		for _, f := range strings.Split(*sizes, ",") {
			if strings.TrimSpace(f) == "" {
				continue // -sizes "": the scale-up alone
			}
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				fmt.Fprintf(os.Stderr, "-sizes: %q is not a node count\n", f)
				os.Exit(2)
			}
			o.Sizes = append(o.Sizes, n)
		}
		o.Progress = os.Stderr
		res, err := awsbench.Run(context.Background(), o)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		res.WriteMarkdown(os.Stdout)
		return
	}
	if *mode != "scaleup" && *mode != "steady" {
		fmt.Fprintln(os.Stderr, "-mode: want scaleup, steady or table")
		os.Exit(2)
	}
	steady := *mode == "steady"
	if steady {
		*timeout = *window
		fmt.Printf("steady state, %d initialized nodes, --node-status-update-frequency=5m, --concurrent-node-syncs=%d, EC2 bucket %d tokens + %g/s per action, window %v from the cloud's start\n\n",
			*nodes, *workers, *bucket, *refill, *window)
	} else {
		fmt.Printf("scale-up of %d nodes, --concurrent-node-syncs=%d, EC2 bucket %d tokens + %g/s per action, timeout %v\n\n",
			*nodes, *workers, *bucket, *refill, *timeout)
	}
	if steady {
		fmt.Println("| side | nodes | window (s) | DescribeInstances | RequestLimitExceeded | other EC2 calls |")
	} else {
		fmt.Println("| side | initialized | time to all (s) | DescribeInstances | RequestLimitExceeded | other EC2 calls |")
	}
	fmt.Println("|---|---|---|---|---|---|")
	for _, side := range strings.Split(*sides, ",") {
		r, err := run(side, *nodes, *workers, ec2sim.Bucket{Size: *bucket, Refill: *refill}, *timeout, steady)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", side, err)
			os.Exit(1)
		}
		t := "-"
		if r.initialized == *nodes || steady {
			t = fmt.Sprintf("%.1f", r.elapsed.Seconds())
		}
		fmt.Printf("| %s | %d/%d | %s | %d | %d | %d |\n", side, r.initialized, *nodes, t, r.describe.Requests, r.describe.Throttled, r.other)
	}
}

type result struct {
	initialized int
	elapsed     time.Duration
	describe    ec2sim.ActionStats
	other       int64
}

func run(side string, n, workers int, b ec2sim.Bucket, timeout time.Duration, steady bool) (*result, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sim, err := ec2sim.Start(ec2sim.Config{
		Region: "us-east-1", Default: b,
		Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}, {Name: "us-east-1b", ID: "use1-az2"}, {Name: "us-east-1c", ID: "use1-az4"}},
	})
	if err != nil {
		return nil, err
	}
	defer sim.Close()
	zones := []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("ip-10-%d-%d-%d.ec2.internal", i>>16, (i>>8)&255, i&255)
		sim.Put(ec2sim.Instance{
			ID: fmt.Sprintf("i-%017x", i+1), Type: "m5.large", Zone: zones[i%3], PrivateDNSName: names[i],
			PrivateIP:  fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255),
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)}}},
			Tags:       map[string]string{"kubernetes.io/cluster/bench": "owned"},
		})
	}
	awsConf := fmt.Sprintf(`[Global]
Zone = us-east-1a
VPC = vpc-0sim
SubnetID = subnet-0sim
KubernetesClusterID = bench

[ServiceOverride "1"]
Service = EC2
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = ec2
`, sim.URL)

	var cloud cloudprovider.Interface
	cgCfg := provider.DefaultConfig()
	// cloudgate's read bucket at EC2's: the quota a user would configure.
	cgCfg.Limits.Read.QPS, cgCfg.Limits.Read.Burst = b.Refill, b.Size
	cgCfg.Metrics = metrics.New()
	switch side {
	case "aws":
		cloud, err = cloudprovider.GetCloudProvider("aws", strings.NewReader(awsConf))
	case "aws+cloudgate":
		var up cloudprovider.Interface
		if up, err = cloudprovider.GetCloudProvider("aws", strings.NewReader(awsConf)); err == nil {
			cloud, err = provider.New(up, cgCfg)
		}
	case "aws-batch+cloudgate", "aws-batch+cloudgate+list":
		// +list: batch.listPrefetch on; its first refresh, at start, lists the new
		// instances before their nodes register (the best case for a scale-up).
		cgCfg.Batch.ListPrefetch = strings.HasSuffix(side, "+list")
		var up *awsbatch.Cloud
		if up, err = awsbatch.New([]byte(awsConf)); err == nil {
			cloud, err = provider.New(up, cgCfg)
		}
	default:
		return nil, fmt.Errorf("unknown side (want aws, aws+cloudgate, aws-batch+cloudgate or aws-batch+cloudgate+list)")
	}
	if err != nil {
		return nil, err
	}

	kube := fake.NewClientset()
	if steady {
		for i, name := range names {
			if _, err := kube.CoreV1().Nodes().Create(ctx, initializedNode(name, i, zones[i%3]), metav1.CreateOptions{}); err != nil {
				return nil, err
			}
		}
		sim.ResetStats() // count from the cloud's start: a list prefetch's first round included
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	nodeInformer := factory.Core().V1().Nodes()
	if iu, ok := cloud.(cloudprovider.InformerUser); ok {
		iu.SetInformers(factory)
	}
	cloud.Initialize(builder{kube}, ctx.Done())
	nc, err := nodecontroller.NewCloudNodeController(nodeInformer, kube, cloud, 5*time.Minute, int32(workers), int32(workers))
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	go nc.RunWithContext(ctx, controllersmetrics.NewControllerManagerMetrics("aws-bench"))

	start := time.Now()
	if steady {
		time.Sleep(timeout)
		r := &result{initialized: n, elapsed: time.Since(start)}
		return finish(r, sim), nil
	}
	sim.ResetStats()
	start = time.Now()
	for _, name := range names {
		node := &v1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1.NodeSpec{Taints: []v1.Taint{
				{Key: cloudproviderapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule},
			}},
		}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, err
		}
	}
	r := &result{}
	deadline := time.After(timeout)
	for r.initialized < n {
		select {
		case <-deadline:
			r.elapsed = time.Since(start)
			return finish(r, sim), nil
		case <-time.After(200 * time.Millisecond):
		}
		all, err := nodeInformer.Lister().List(labels.Everything())
		if err != nil {
			return nil, err
		}
		r.initialized = 0
		for _, node := range all {
			if node.Spec.ProviderID != "" && !tainted(node) {
				r.initialized++
			}
		}
	}
	r.elapsed = time.Since(start)
	return finish(r, sim), nil
}

// initializedNode is a node the CCM initialized earlier: provider ID, labels, addresses, Ready.
func initializedNode(name string, i int, zone string) *v1.Node {
	ip := fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255)
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.LabelTopologyZone: zone, v1.LabelTopologyRegion: "us-east-1", v1.LabelInstanceTypeStable: "m5.large",
		}},
		Spec: v1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/i-%017x", zone, i+1)},
		Status: v1.NodeStatus{
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}, {Type: v1.NodeInternalDNS, Address: name}, {Type: v1.NodeHostName, Address: name}},
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
		},
	}
}

func finish(r *result, sim *ec2sim.Server) *result {
	for action, st := range sim.AllStats() {
		switch {
		case action == "DescribeInstances":
			r.describe = st
		case ec2sim.IsEC2Action(action): // not the load balancing APIs' actions
			r.other += st.Requests
		}
	}
	return r
}

func tainted(node *v1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == cloudproviderapi.TaintExternalCloudProvider {
			return true
		}
	}
	return false
}

// builder is the client builder the AWS provider's Initialize needs, on the fake clientset.
type builder struct{ cs kubernetes.Interface }

func (b builder) Config(string) (*rest.Config, error)         { return &rest.Config{}, nil }
func (b builder) ConfigOrDie(string) *rest.Config             { return &rest.Config{} }
func (b builder) Client(string) (kubernetes.Interface, error) { return b.cs, nil }
func (b builder) ClientOrDie(string) kubernetes.Interface     { return b.cs }
