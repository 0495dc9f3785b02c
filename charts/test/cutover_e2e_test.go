//go:build linux

package test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/providers/aws/ec2sim"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// The CCM's default leader-election timings (k8s.io/cloud-provider), which both CCMs run
// with here: the windows printed are the default install's.
const (
	cutoverLease = 15 * time.Second
	cutoverRetry = 2 * time.Second
	// client-go polls every retry period × (1 + U[0, 1.2)); a standby's lease clock starts
	// when it sees the leader's last renewal (up to one poll late) and it acquires at its
	// first poll past the lease: so within lease + 2 polls of the leader's end.
	cutoverPoll = time.Duration(2.2 * float64(cutoverRetry))

	stockRelease     = "aws-cloud-controller-manager"
	cloudgateRelease = "cloudgate"
	cutoverCluster   = "e2e"
)

// TestE2ECutover runs docs/install-aws.md's runbook — from the stock AWS
// cloud-controller-manager to cloudgate and back — with Helm's Go SDK against a real
// kube-apiserver + etcd. The stock release is the stock chart itself
// (charts/aws-cloud-controller-manager of k8s.io/cloud-provider-aws, from the module cache),
// with the values a self-managed cluster gives it (its aws.conf from a ConfigMap);
// cloudgate's is charts/cloudgate with the runbook's values.
//
// There is no kubelet: the test runs each installed workload's Pods as processes configured
// from what the release put in the API server — the container's args, its ConfigMap and
// Secret volumes written to files (mount paths rewritten to those files, in args and file
// contents), and a token of the Pod's ServiceAccount from the TokenRequest API, so each CCM
// has exactly its release's RBAC. The stock chart's image is the upstream AWS CCM binary
// (k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager, unmodified), cloudgate's is
// providers/aws's; both talk to ec2sim. A workload that Helm deletes gets SIGTERM, as its
// Pods would.
//
// Steps: stock installed and leading (a Node initialised); `helm get values` saved as YAML
// and the chart version noted; cloudgate installed beside it (no ownership conflict), healthy
// and waiting on the shared Lease; `helm uninstall` of the stock release; cloudgate takes the
// Lease; a new Node initialised by cloudgate; rollback: the stock chart at the noted version
// installed with the saved values, healthy and waiting; `helm uninstall cloudgate`; the stock
// CCM takes the Lease; a new Node initialised by it. It checks that no leaderless window is
// longer than the lease duration (printed), that no object of either release is left behind
// once it is uninstalled, and that no CCM log has a "forbidden".
func TestE2ECutover(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 28*time.Minute)
	defer cancel()
	dir := t.TempDir()
	began := time.Now()
	phase := func(name string) { t.Logf("phase %-44s at %6.1fs", name, time.Since(began).Seconds()) }

	// Both binaries with -race, as providers/aws's `go test -race` run has compiled their
	// dependencies just before (make test): mostly links.
	awsMod, err := filepath.Abs("../../providers/aws")
	if err != nil {
		t.Fatal(err)
	}
	cloudgateBin, stockBin := filepath.Join(dir, "cloudgate-aws-ccm"), filepath.Join(dir, "aws-cloud-controller-manager")
	builtCloudgate := goBuildRace(ctx, t, awsMod, cloudgateBin, "./cmd/cloud-controller-manager")
	builtStock := goBuildRace(ctx, t, awsMod, stockBin, "k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager")
	stockChart := stockChartDir(t)

	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	adminKubeconfig := filepath.Join(dir, "admin.kubeconfig")
	cp.Kubeconfig(t, adminKubeconfig, cp.AdminToken)
	helm := newHelm(t, adminKubeconfig)
	phase("control plane")

	sim, nodeNames, awsConf := startAWSCloud(ctx, t, cp, 0x200, 3)
	stockValues := map[string]any{
		// --configure-cloud-routes=false as AWS's examples: with the default (true) the route
		// controller needs --cluster-cidr, or the CCM exits at start.
		"args":              []any{"--v=2", "--cloud-provider=aws", "--cloud-config=/etc/aws/cloud.conf", "--configure-cloud-routes=false"},
		"extraVolumes":      []any{map[string]any{"name": "aws-cloud-config", "configMap": map[string]any{"name": "aws-cloud-config"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "aws-cloud-config", "mountPath": "/etc/aws", "readOnly": true}},
	}
	stockRel := helm.install(t, stockRelease, stockChart, stockValues)
	pinnedVersion := stockRel.Chart.Metadata.Version
	phase("stock chart installed (" + stockRel.Chart.Metadata.Name + " " + pinnedVersion + ")")

	lw := watchLease(ctx, t, cp)
	// Host networking, as the stock chart's hostNetworking and cloudgate's hostNetwork: the
	// stock CCM binds its real port 10258 and cloudgate's first replica the chart's
	// metrics.port on the same 127.0.0.1 (one control-plane node), as on a cluster.
	k := &kubelet{cp: cp, dir: dir, hostNetwork: true}
	if err := <-builtStock; err != nil {
		t.Fatal(err)
	}
	stock := k.run(ctx, t, "DaemonSet", stockRelease, stockBin)
	stockLeader := lw.waitHolder(ctx, t, "the stock CCM leads", func(h string) bool { return h != "" })
	nodes := newNodes(cp)
	nodes.add(ctx, t, nodeNames[0])
	nodes.waitInitialized(ctx, t, nodeNames[0], stock)
	phase("stock CCM leads; node 1 initialised by it")

	// Runbook 1: keep the stock release's values (-o yaml: what -f reads back) and version.
	saved := filepath.Join(dir, "stock-values.yaml")
	helm.getValuesYAML(t, stockRelease, saved)

	// Runbook 2: cloudgate beside the stock release.
	if err := <-builtCloudgate; err != nil {
		t.Fatal(err)
	}
	cloudgateValues := map[string]any{
		"image":    map[string]any{"repository": "registry.example.com/cloudgate-aws-ccm", "tag": "v0.0.0-e2e"},
		"upstream": map[string]any{"name": "aws-batch", "cloudConfig": awsConf},
	}
	cgRel := helm.install(t, cloudgateRelease, "../cloudgate", cloudgateValues)
	cg := k.run(ctx, t, "Deployment", workloadName, cloudgateBin)
	phase(fmt.Sprintf("cloudgate installed beside it (%d replicas)", len(cg)))

	// Runbook 3: cloudgate healthy (every replica's /healthz answered in k.run) and waiting:
	// over two of its polls the Lease stays the stock CCM's.
	time.Sleep(2 * cutoverPoll)
	if h := lw.holder(); h != stockLeader {
		t.Fatalf("the Lease went from the stock CCM (%q) to %q while the stock CCM ran", stockLeader, h)
	}
	for _, p := range cg {
		if len(grep(t, p, `Waiting for the Lease`)) == 0 || len(grep(t, p, `Leading: starting the controllers`)) > 0 {
			t.Errorf("%s: not waiting on the Lease:\n%s", p.name, e2e.Tail(p.proc.Log, 10))
		}
	}
	phase("cloudgate healthy and waiting")

	// Runbook 4: helm uninstall the stock release; its Pods get SIGTERM; cloudgate takes over.
	helm.uninstall(t, stockRelease)
	stopped := k.stop(ctx, t, stock, "DaemonSet", stockRelease)
	cgLeader := lw.waitHolder(ctx, t, "cloudgate leads", func(h string) bool { return h != "" && h != stockLeader })
	if !isCloudgate(t, cg, cgLeader) {
		t.Fatalf("the Lease holder %q after the stock release went is no cloudgate replica", cgLeader)
	}
	cutover := lw.handover(t, "cut-over (stock -> cloudgate)", stockLeader, cgLeader, stopped)
	nodes.add(ctx, t, nodeNames[1])
	nodes.waitInitialized(ctx, t, nodeNames[1], cg)
	phase("cloudgate leads; node 2 initialised by it")
	leftBehind(ctx, t, cp, stockRelease, stockRel.Manifest, awsCloudConfigMap)

	// Rollback: the stock chart at the version noted, with the saved values.
	vals, err := common.ReadValuesFile(saved)
	if err != nil {
		t.Fatalf("reading back `helm get values -o yaml` with -f: %v", err)
	}
	ch, err := loader.Load(stockChart)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != pinnedVersion {
		t.Fatalf("rollback chart version %s, want the pinned %s", ch.Metadata.Version, pinnedVersion)
	}
	helm.install(t, stockRelease, stockChart, vals.AsMap())
	stock2 := k.run(ctx, t, "DaemonSet", stockRelease, stockBin)
	time.Sleep(2 * cutoverPoll)
	if h := lw.holder(); h != cgLeader {
		t.Fatalf("the Lease went from cloudgate (%q) to %q while cloudgate ran", cgLeader, h)
	}
	phase("rollback: stock reinstalled, healthy and waiting")
	// cloudgate's workload first (kubectl delete deployment), so that its Pods release the
	// Lease on SIGTERM while their ServiceAccount and RBAC still exist; `helm uninstall`
	// alone deletes those with the workload, and the release is refused (the Lease is then
	// waited out). Then helm uninstall removes the rest.
	if err := cp.Admin.AppsV1().Deployments("kube-system").Delete(ctx, workloadName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	stopped = k.stop(ctx, t, cg, "Deployment", workloadName)
	for _, p := range cg {
		if err := p.proc.WaitExit(10 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v (want exit status 0)", p.name, err)
		}
	}
	helm.uninstall(t, cloudgateRelease)
	stockLeader2 := lw.waitHolder(ctx, t, "the stock CCM leads again", func(h string) bool { return h != "" && h != cgLeader })
	if isCloudgate(t, cg, stockLeader2) {
		t.Fatalf("the Lease holder %q after cloudgate went is a cloudgate replica", stockLeader2)
	}
	rollback := lw.handover(t, "rollback (cloudgate -> stock)", cgLeader, stockLeader2, stopped)
	// cloudgate released the Lease on SIGTERM: the stock CCM did not wait it out.
	if rollback >= cutoverLease-cutoverRetry {
		t.Errorf("rollback: the stock CCM led %v after cloudgate's SIGTERM; a released Lease is taken at the next poll (< %v)", rollback, cutoverLease-cutoverRetry)
	}
	nodes.add(ctx, t, nodeNames[2])
	nodes.waitInitialized(ctx, t, nodeNames[2], stock2)
	phase("stock CCM leads; node 3 initialised by it")
	leftBehind(ctx, t, cp, cloudgateRelease, cgRel.Manifest)

	for _, p := range slices.Concat(stock, cg, stock2) {
		if f := grep(t, p, `(?i)forbidden`); len(f) > 0 {
			t.Errorf("%s: the API server refused it %d times (its release's RBAC lacks a rule):\n%s", p.name, len(f), strings.Join(f[:min(len(f), 10)], "\n"))
		}
	}
	t.Logf("leaderless windows (lease %v, retry %v): cut-over %.1fs, rollback %.1fs from the old leader's SIGTERM", cutoverLease, cutoverRetry, cutover.Seconds(), rollback.Seconds())
	t.Logf("simulated EC2: %+v", sim.AllStats())
}

// startAWSCloud starts ec2sim with n instances of the cluster (IDs from firstID, names
// ip-10-0-X-I.ec2.internal with X = firstID/256) and makes the cluster as its operator has
// it: the AWS provider's cloud.conf pointing at ec2sim in the ConfigMap
// kube-system/aws-cloud-config (the operator's, not a release's), and the node's
// credentials (an instance profile, in a cluster) as static ones in the environment. It
// returns the simulator, the instances' node names and the cloud.conf.
// awsCloudConfigMap is the operator's ConfigMap holding the AWS provider's cloud.conf.
const awsCloudConfigMap = "aws-cloud-config"

func startAWSCloud(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, firstID, n int) (*ec2sim.Server, []string, string) {
	t.Helper()
	sim, err := ec2sim.Start(ec2sim.Config{Region: "us-east-1", Zones: []ec2sim.Zone{{Name: "us-east-1a", ID: "use1-az1"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	var nodeNames []string
	for i := range n {
		ip := fmt.Sprintf("10.0.%d.%d", firstID/256, i+1)
		dns := "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal"
		nodeNames = append(nodeNames, dns)
		sim.Put(ec2sim.Instance{
			ID: fmt.Sprintf("i-%017x", firstID+i), Type: "m5.large", Zone: "us-east-1a", PrivateDNSName: dns,
			PrivateIP:  ip,
			Interfaces: []ec2sim.NetworkInterface{{Status: "in-use", PrivateIPs: []string{ip}}},
			Tags:       map[string]string{"kubernetes.io/cluster/" + cutoverCluster: "owned"},
		})
	}
	awsConf := fmt.Sprintf(`[Global]
Zone = us-east-1a
VPC = vpc-0e2e
SubnetID = subnet-0e2e
KubernetesClusterID = %s

[ServiceOverride "1"]
Service = EC2
Region = us-east-1
URL = %s
SigningRegion = us-east-1
SigningName = ec2
`, cutoverCluster, sim.URL)
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKIDSIMULATED", "AWS_SECRET_ACCESS_KEY": "simulated-secret",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
	} {
		t.Setenv(k, v)
	}
	userCM := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: awsCloudConfigMap, Namespace: "kube-system"},
		Data: map[string]string{"cloud.conf": awsConf}}
	if err := e2e.Poll(ctx, "ConfigMap kube-system/aws-cloud-config", 200*time.Millisecond, 30*time.Second, func() (bool, error) {
		_, err := cp.Admin.CoreV1().ConfigMaps("kube-system").Create(ctx, userCM, metav1.CreateOptions{})
		return err == nil, err
	}); err != nil {
		t.Fatal(err)
	}
	return sim, nodeNames, awsConf
}

// goBuildRace runs `go build -race -o out pkg` in dir in the background (testkit/e2e's build).
func goBuildRace(ctx context.Context, t *testing.T, dir, out, pkg string) <-chan error {
	t.Helper()
	return e2e.BuildRaceIn(ctx, t, "go", dir, out, pkg, 22*time.Minute)
}

// helmClient runs Helm's actions (the SDK behind the helm command) as the cluster admin.
type helmClient struct{ cfg *action.Configuration }

func newHelm(t *testing.T, kubeconfig string) *helmClient {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	ns := "kube-system"
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := action.NewConfiguration()
	if err := cfg.Init(flags, ns, "secret"); err != nil {
		t.Fatal(err)
	}
	return &helmClient{cfg: cfg}
}

// install is `helm install NAME CHART -n kube-system` with vals.
func (h *helmClient) install(t *testing.T, name, chartDir string, vals map[string]any) *release.Release {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	in := action.NewInstall(h.cfg)
	in.ReleaseName, in.Namespace = name, "kube-system"
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, 2*time.Minute
	r, err := in.Run(ch, vals)
	if err != nil {
		t.Fatalf("helm install %s %s: %v", name, chartDir, err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		t.Fatalf("helm install %s: release of type %T", name, r)
	}
	return rel
}

// uninstall is `helm uninstall NAME -n kube-system`.
func (h *helmClient) uninstall(t *testing.T, name string) {
	t.Helper()
	u := action.NewUninstall(h.cfg)
	u.WaitStrategy, u.Timeout = kube.HookOnlyStrategy, 2*time.Minute
	if _, err := u.Run(name); err != nil {
		t.Fatalf("helm uninstall %s: %v", name, err)
	}
}

// getValuesYAML is `helm get values NAME -o yaml > file`.
func (h *helmClient) getValuesYAML(t *testing.T, name, file string) {
	t.Helper()
	vals, err := action.NewGetValues(h.cfg).Run(name)
	if err != nil {
		t.Fatalf("helm get values %s: %v", name, err)
	}
	data, err := yaml.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	e2e.WriteFile(t, file, string(data))
}

// ccmProc is one "Pod" of a workload, run as a process.
type ccmProc struct {
	name string
	proc *e2e.Process
}

// kubelet runs a workload's Pods as processes (see TestE2ECutover).
type kubelet struct {
	cp  *e2e.ControlPlane
	dir string
	n   int
	// hostNetwork: the first Pod of each workload run is on one shared "node" (127.0.0.1,
	// the network namespace of a host-network Pod) and binds the secure port its Pod spec
	// asks for (the CCM's default, 10258, when it asks none), as host-network CCM Pods of
	// two releases on one control-plane node do; the other replicas are on other nodes
	// (required anti-affinity) and get free ports.
	hostNetwork bool
}

// ccmDefaultSecurePort is the cloud-controller-manager's --secure-port default.
const ccmDefaultSecurePort = 10258

// podSecurePort is the last --secure-port in args (the CCM's default without one).
func podSecurePort(t *testing.T, args []string) int {
	t.Helper()
	port := ccmDefaultSecurePort
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--secure-port="); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("--secure-port=%q: %v", v, err)
			}
			port = n
		}
	}
	return port
}

// readyzFlag is the CCM's flag for its /readyz listener (cmd/ccm).
const readyzFlag = "--readyz-bind-address="

// podReadyzPort is the port of the last --readyz-bind-address in args, 0 without one.
func podReadyzPort(t *testing.T, args []string) int {
	t.Helper()
	port := 0
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, readyzFlag); ok {
			_, p, err := net.SplitHostPort(v)
			if err != nil {
				t.Fatalf("%s%q: %v", readyzFlag, v, err)
			}
			if port, err = strconv.Atoi(p); err != nil {
				t.Fatalf("%s%q: %v", readyzFlag, v, err)
			}
		}
	}
	return port
}

// localReadyz gives a process /readyz on a free port of 127.0.0.1 when its template serves
// one (each Pod has its own network namespace; here they share the host's): the flag to
// append, and the template's port mapped to the local one.
func localReadyz(t *testing.T, args []string) (flags []string, ports map[int]int) {
	t.Helper()
	ports = map[int]int{}
	if p := podReadyzPort(t, args); p != 0 {
		local := e2e.FreePort(t)
		ports[p] = local
		flags = append(flags, readyzFlag+"127.0.0.1:"+strconv.Itoa(local))
	}
	return flags, ports
}

// run starts the Pods of kind/name (a Deployment's replicas; one for a DaemonSet: one
// control-plane node) with bin as the container's image, and waits until each serves
// /healthz.
func (k *kubelet) run(ctx context.Context, t *testing.T, kind, name, bin string) []*ccmProc {
	t.Helper()
	apps := k.cp.Admin.AppsV1()
	var tmpl corev1.PodTemplateSpec
	replicas := 1
	switch kind {
	case "DaemonSet":
		ds, err := apps.DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tmpl = ds.Spec.Template
	case "Deployment":
		d, err := apps.Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tmpl = d.Spec.Template
		if d.Spec.Replicas != nil {
			replicas = int(*d.Spec.Replicas)
		}
	}
	var procs []*ccmProc
	for i := range replicas {
		k.n++
		pname := fmt.Sprintf("%s-%d", name, k.n)
		args := k.podArgs(ctx, t, pname, tmpl.Spec)
		port := e2e.FreePort(t)
		if k.hostNetwork && i == 0 {
			port = podSecurePort(t, args)
			// Another process answering /healthz on a shared port would pass WaitServing for
			// this one, which exits "bind: address already in use": check the port first.
			if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
				t.Fatalf("%s: its secure port %d is held by another Pod on the same host network (the CCM would exit \"bind: address already in use\"): %v", pname, port, err)
			} else {
				l.Close()
			}
		}
		readyz, _ := localReadyz(t, args)
		args = append(args, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--webhook-secure-port=0")
		args = append(args, readyz...)
		t.Logf("%s: %s %s", pname, filepath.Base(bin), strings.Join(args, " "))
		p := e2e.StartProcess(t, k.dir, pname, bin, args...)
		p.WaitServing(ctx, t, port, k.cp.AdminToken, 3*time.Minute)
		procs = append(procs, &ccmProc{name: pname, proc: p})
	}
	return procs
}

// podArgs returns the container's command line for a process: its args (and command after
// the entrypoint), with every volume mount written under dir and its mount path rewritten
// there, plus kubeconfigs with a token of the Pod's ServiceAccount.
func (k *kubelet) podArgs(ctx context.Context, t *testing.T, pname string, spec corev1.PodSpec) []string {
	t.Helper()
	root := filepath.Join(k.dir, pname)
	ctr := spec.Containers[0]
	type file struct{ path, data string }
	var files []file
	var rewrites []string // old, new pairs, longest old first
	mounts := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		local := filepath.Join(root, "mounts", m.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			t.Fatal(err)
		}
		mounts[m.MountPath] = local
		for _, v := range spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			data := map[string]string{}
			var items []corev1.KeyToPath
			switch {
			case v.ConfigMap != nil:
				cm, err := k.cp.Admin.CoreV1().ConfigMaps("kube-system").Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("%s: volume %s: %v", pname, v.Name, err)
				}
				data, items = cm.Data, v.ConfigMap.Items
			case v.Secret != nil:
				s, err := k.cp.Admin.CoreV1().Secrets("kube-system").Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
				if err != nil {
					t.Fatalf("%s: volume %s: %v", pname, v.Name, err)
				}
				for key, b := range s.Data {
					data[key] = string(b)
				}
				items = v.Secret.Items
			}
			paths := map[string]string{}
			for key := range data {
				paths[key] = key
			}
			if len(items) > 0 {
				paths = map[string]string{}
				for _, it := range items {
					paths[it.Key] = it.Path
				}
			}
			for key, p := range paths {
				files = append(files, file{filepath.Join(local, p), data[key]})
			}
		}
	}
	paths := make([]string, 0, len(mounts))
	for p := range mounts {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	for _, p := range paths {
		rewrites = append(rewrites, p, mounts[p])
	}
	rw := strings.NewReplacer(rewrites...)
	for _, f := range files {
		e2e.WriteFile(t, f.path, rw.Replace(f.data))
	}

	sa := spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	exp := int64(3600)
	tok, err := k.cp.Admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: a token for ServiceAccount kube-system/%s: %v", pname, sa, err)
	}
	kubeconfig := filepath.Join(root, "kubeconfig")
	k.cp.Kubeconfig(t, kubeconfig, tok.Status.Token)

	var args []string
	if len(ctr.Command) > 1 {
		args = append(args, ctr.Command[1:]...)
	}
	args = append(args, ctr.Args...)
	for i, a := range args {
		args[i] = rw.Replace(a)
	}
	return append(args, "--kubeconfig="+kubeconfig, "--authentication-kubeconfig="+kubeconfig, "--authorization-kubeconfig="+kubeconfig)
}

// stop waits until Helm has deleted the workload, then sends its Pods SIGTERM (as the
// kubelet does when their Pods go) and returns when it did.
func (k *kubelet) stop(ctx context.Context, t *testing.T, procs []*ccmProc, kind, name string) time.Time {
	t.Helper()
	err := e2e.Poll(ctx, kind+" "+name+" deleted", 100*time.Millisecond, time.Minute, func() (bool, error) {
		var err error
		if kind == "DaemonSet" {
			_, err = k.cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
		} else {
			_, err = k.cp.Admin.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
		}
		return apierrors.IsNotFound(err), err
	})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for _, p := range procs {
		p.proc.Terminate(t)
	}
	return at
}

// isCloudgate reports whether a Lease holder identity is one of cloudgate's replicas (each
// logs its identity while it waits).
func isCloudgate(t *testing.T, cg []*ccmProc, holder string) bool {
	for _, p := range cg {
		if len(grep(t, p, regexp.QuoteMeta(strconv.Quote(holder)))) > 0 {
			return true
		}
	}
	return false
}

func grep(t *testing.T, p *ccmProc, re string) []string {
	t.Helper()
	return e2e.GrepLines(t, p.proc.Log, regexp.MustCompile(re))
}

// leaseRecord is one state of the Lease kube-system/cloud-controller-manager.
type leaseRecord struct {
	holder           string
	acquire, renew   time.Time
	duration         time.Duration
	firstSeen, until time.Time
}

// leaseWatch samples the Lease every 50 ms and keeps each distinct record.
type leaseWatch struct {
	mu      sync.Mutex
	records []leaseRecord
	samples int
}

func watchLease(ctx context.Context, t *testing.T, cp *e2e.ControlPlane) *leaseWatch {
	lw := &leaseWatch{}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wctx.Err() == nil {
			l, err := cp.Admin.CoordinationV1().Leases("kube-system").Get(wctx, "cloud-controller-manager", metav1.GetOptions{})
			if err == nil {
				r := leaseRecord{firstSeen: time.Now()}
				if l.Spec.HolderIdentity != nil {
					r.holder = *l.Spec.HolderIdentity
				}
				if l.Spec.AcquireTime != nil {
					r.acquire = l.Spec.AcquireTime.Time
				}
				if l.Spec.RenewTime != nil {
					r.renew = l.Spec.RenewTime.Time
				}
				if l.Spec.LeaseDurationSeconds != nil {
					r.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
				}
				lw.mu.Lock()
				lw.samples++
				if n := len(lw.records); n > 0 && lw.records[n-1].holder == r.holder && lw.records[n-1].renew.Equal(r.renew) {
					lw.records[n-1].until = r.firstSeen
				} else {
					r.until = r.firstSeen
					lw.records = append(lw.records, r)
				}
				lw.mu.Unlock()
			}
			select {
			case <-wctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	return lw
}

func (lw *leaseWatch) holder() string {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if len(lw.records) == 0 {
		return ""
	}
	return lw.records[len(lw.records)-1].holder
}

func (lw *leaseWatch) waitHolder(ctx context.Context, t *testing.T, what string, ok func(string) bool) string {
	t.Helper()
	var h string
	if err := e2e.Poll(ctx, what, 50*time.Millisecond, 2*time.Minute, func() (bool, error) {
		h = lw.holder()
		return ok(h), fmt.Errorf("Lease holder %q", h)
	}); err != nil {
		t.Fatal(err)
	}
	return h
}

// handover reports the leaderless windows of the hand-over from holder old to holder next:
// by the Lease (from when old's lease ended — its release, or its last renewal + its lease
// duration — to new's acquire time), which must not exceed the lease duration; and from
// old's SIGTERM (stopped) to new's acquire time, when no CCM acted, which must stay within
// the lease duration plus the standby's two polls (see cutoverPoll). It returns the latter.
func (lw *leaseWatch) handover(t *testing.T, what, old, next string, stopped time.Time) time.Duration {
	t.Helper()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	var ended, acquired time.Time
	released := false
	for _, r := range lw.records {
		switch r.holder {
		case old:
			ended, released = r.renew.Add(r.duration), false
		case "":
			if !ended.IsZero() && acquired.IsZero() {
				ended, released = r.renew, true
			}
		case next:
			if acquired.IsZero() {
				acquired = r.acquire
			}
		}
	}
	if ended.IsZero() || acquired.IsZero() {
		t.Fatalf("%s: the Lease records show no hand-over from %q to %q: %+v", what, old, next, lw.records)
	}
	byLease := max(0, acquired.Sub(ended))
	noCCM := acquired.Sub(stopped)
	how := "waited out (not released)"
	if released {
		how = "released on SIGTERM"
	}
	t.Logf("%s: Lease %s; leaderless by the Lease %.2fs (bound: lease duration %v); no CCM acting from the old leader's SIGTERM to the new one's acquire: %.2fs (bound: lease %v + 2 polls of up to %v); %d Lease samples",
		what, how, byLease.Seconds(), cutoverLease, noCCM.Seconds(), cutoverLease, cutoverPoll, lw.samples)
	if byLease > cutoverLease {
		t.Errorf("%s: leaderless by the Lease for %v, longer than the lease duration %v", what, byLease, cutoverLease)
	}
	if noCCM > cutoverLease+2*cutoverPoll {
		t.Errorf("%s: no CCM acted for %v, longer than the lease %v + 2 polls", what, noCCM, cutoverLease)
	}
	return noCCM
}

// leftBehind fails the test for every object of an uninstalled release's manifest that is
// still in the API server (keep names objects the release never owned).
func leftBehind(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, rel, manifest string, keep ...string) {
	t.Helper()
	cfg := &rest.Config{Host: cp.URL, BearerToken: cp.AdminToken, TLSClientConfig: rest.TLSClientConfig{CAFile: cp.CAFile}}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	checked := 0
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(u.Object) == 0 || slices.Contains(keep, u.GetName()) {
			continue
		}
		gv, err := schema.ParseGroupVersion(u.GetAPIVersion())
		if err != nil {
			t.Fatal(err)
		}
		gvr := gv.WithResource(strings.ToLower(u.GetKind()) + "s")
		var getErr error
		if u.GetNamespace() != "" || namespaced(u.GetKind()) {
			_, getErr = dyn.Resource(gvr).Namespace("kube-system").Get(ctx, u.GetName(), metav1.GetOptions{})
		} else {
			_, getErr = dyn.Resource(gvr).Get(ctx, u.GetName(), metav1.GetOptions{})
		}
		if !apierrors.IsNotFound(getErr) {
			t.Errorf("release %s uninstalled, but its %s %s is still there (%v)", rel, u.GetKind(), u.GetName(), getErr)
		}
		checked++
	}
	if checked == 0 {
		t.Fatalf("release %s: no object in its manifest", rel)
	}
	t.Logf("release %s uninstalled: none of its %d objects left", rel, checked)
}

func namespaced(kind string) bool {
	return !slices.Contains([]string{"ClusterRole", "ClusterRoleBinding", "Namespace", "PriorityClass"}, kind)
}

// nodes creates Nodes as kubelets with --cloud-provider=external register them; an
// initialised one has a provider ID with providerIDPrefix and the zone label zone.
type nodeSet struct {
	cp                     *e2e.ControlPlane
	providerIDPrefix, zone string
}

// newNodes is a nodeSet of startAWSCloud's instances.
func newNodes(cp *e2e.ControlPlane) nodeSet { return nodeSet{cp, "aws:///us-east-1a/i-", "us-east-1a"} }

func (n nodeSet) add(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	if _, err := n.cp.Admin.CoreV1().Nodes().Create(ctx, e2e.UninitializedNode(name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.cp.SetNodeReady(ctx, t, name, corev1.ConditionTrue)
}

// waitInitialized waits until the cloud-node controller has initialised the Node (provider
// ID, zone, no uninitialized taint) and checks that one of by (the only CCM Pods running)
// logged it.
func (n nodeSet) waitInitialized(ctx context.Context, t *testing.T, name string, by []*ccmProc) {
	t.Helper()
	err := e2e.Poll(ctx, "node "+name+" initialised", 100*time.Millisecond, 2*time.Minute, func() (bool, error) {
		node, err := n.cp.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == e2e.UninitializedTaint {
				return false, errors.New("still tainted")
			}
		}
		if !strings.HasPrefix(node.Spec.ProviderID, n.providerIDPrefix) || node.Labels[corev1.LabelTopologyZone] != n.zone {
			return false, fmt.Errorf("providerID %q, labels %v", node.Spec.ProviderID, node.Labels)
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The controller logs the initialisation right after its update: poll the logs briefly.
	err = e2e.Poll(ctx, "node "+name+" initialised by "+by[0].name, 100*time.Millisecond, 10*time.Second, func() (bool, error) {
		for _, p := range by {
			if len(grep(t, p, `Successfully initialized node `+regexp.QuoteMeta(name))) > 0 {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("node %s initialised, but not by %s: %v", name, by[0].name, err)
	}
}
