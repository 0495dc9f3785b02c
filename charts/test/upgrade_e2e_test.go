//go:build linux

package test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cloudgate/cloudgate/limiter/fleet/fleettest"
	"github.com/cloudgate/cloudgate/testkit/e2e"
)

// stockDisabledLabel is the nodeSelector the scale-to-zero cut-over adds to the stock
// chart's values (docs/install-aws.md): a label no Node carries, so its DaemonSet runs on none.
const stockDisabledLabel = "cloudgate/stock-ccm-disabled"

// emulatedControlPlaneNode is the labels of the one control-plane node the emulated kubelet
// stands for: a DaemonSet has a Pod there when its nodeSelector matches them.
var emulatedControlPlaneNode = map[string]string{
	"kubernetes.io/hostname": "control-plane-1", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
	"node-role.kubernetes.io/control-plane": "",
}

// TestE2EUpgrade runs, on one real kube-apiserver + etcd and with Helm's Go SDK, what a user
// does after the first install, from the chart a release ships (make release's .tgz, not the
// directory):
//
//  1. the scale-to-zero cut-over (docs/install-aws.md, "GitOps"): the stock AWS chart
//     installed and leading; cloudgate's packaged chart installed beside it (2 replicas,
//     waiting); the stock release upgraded with a nodeSelector no Node matches, so its
//     DaemonSet runs nowhere but the release stays installed; cloudgate takes the Lease;
//  2. `helm upgrade` of cloudgate with a config change: the checksum/config annotation
//     changes the Pod template, the Deployment rolls both Pods, the new ones run the new
//     cloudgate.yaml;
//  3. `helm upgrade` with an image tag change: both Pods roll to the new image;
//     then `helm upgrade` to a config the CCM refuses (the schema cannot see into the
//     upstream's cloudConfig): the surge Pod never becomes ready, maxUnavailable 0 keeps
//     both old Pods running and leading, Nodes keep initialising; `helm rollback` to the
//     last good revision ends the stalled rollout without restarting the old Pods;
//     then `helm upgrade` with an upstream.name no image registers (aws-bach): the schema
//     refuses it naming /upstream/name, nothing rolls; then limits.shared with a real
//     redis-server, killed: failureMode open rolls (its Pods are Ready, the leader serves
//     its floor: a new Node initialised), failureMode closed stalls (the surge Pod runs but
//     its /readyz answers 503 naming the setting and the Redis; the old Pods keep running and
//     leading), and once Redis is restarted that Pod turns Ready and the rollout completes
//     with the leader in the fleet;
//  4. `helm rollback cloudgate 1`: the first revision's template (image and config) again;
//  5. back to the stock CCM the same way: the stock release's saved values restored (its
//     Pod starts and waits), then cloudgate upgraded to `replicas: 0`; the stock CCM leads.
//
// Throughout: the Lease is never leaderless longer than one lease duration (every window
// printed), the Nodes' providerID, labels and taints are never changed once initialised,
// every step's new leader initialises a new Node, and no CCM logs a "forbidden".
//
// What is emulated (there is no kubelet, scheduler or kube-controller-manager): the Pods are
// processes started from the workload's Pod template as TestE2ECutover's kubelet does
// (args, ConfigMap/Secret volumes as files, a token of the Pod's ServiceAccount). An image is
// a binary: each image reference the test uses maps to an AWS CCM binary stamped with that
// tag as its version, and each Pod's log must print that version. The Deployment
// controller is emulated by rollDeployment: it rolls only when the Pod template changed
// (semantic equality of the stored template, as the controller's template hash), in the
// Deployment's own RollingUpdate steps (maxSurge rounded up, maxUnavailable rounded down,
// of spec.replicas; a new Pod counts as available once /healthz and its readinessProbe, if
// any, answer and minReadySeconds have passed; old Pods go newest first, as the ReplicaSet
// controller picks them, with SIGTERM and a wait for their exit). The DaemonSet controller
// is emulated by syncDaemonSet: one Pod when the template's nodeSelector matches
// emulatedControlPlaneNode, none otherwise, replaced when the template changes.
func TestE2EUpgrade(t *testing.T) {
	etcdBin, apiserverBin, _ := e2e.Tools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	dir := t.TempDir()
	began := time.Now()
	phase := func(name string) { t.Logf("phase %-52s at %6.1fs", name, time.Since(began).Seconds()) }

	rel := releaseUnderTest(t)
	relChart, err := loader.Load(rel.chart)
	if err != nil {
		t.Fatalf("loading the packaged chart %s: %v", rel.chart, err)
	}
	repo := TestImageRepository // the chart requires one: the user's registry
	firstImage := repo + ":" + relChart.Metadata.AppVersion
	const nextTag = "v0.0.0-e2e-upgrade"
	nextImage := repo + ":" + nextTag

	// The images: the AWS CCM binary (-race, as providers/aws's race tests compiled it
	// just before), stamped with each image's tag; the stock chart's image is the upstream
	// AWS CCM.
	awsMod, err := filepath.Abs("../../providers/aws")
	if err != nil {
		t.Fatal(err)
	}
	firstBin, nextBin, stockBin := filepath.Join(dir, "cloudgate-first"), filepath.Join(dir, "cloudgate-next"), filepath.Join(dir, "stock-aws-ccm")
	builds := []<-chan error{
		goBuildRaceVersion(ctx, t, awsMod, firstBin, "./cmd/cloud-controller-manager", relChart.Metadata.AppVersion),
		goBuildRaceVersion(ctx, t, awsMod, nextBin, "./cmd/cloud-controller-manager", nextTag),
		goBuildRace(ctx, t, awsMod, stockBin, "k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager"),
	}
	stockChart := stockChartDir(t)

	cp := e2e.StartControlPlane(ctx, t, dir, etcdBin, apiserverBin)
	adminKubeconfig := filepath.Join(dir, "admin.kubeconfig")
	cp.Kubeconfig(t, adminKubeconfig, cp.AdminToken)
	helm := newHelm(t, adminKubeconfig)
	phase("control plane")

	_, nodeNames, awsConf := startAWSCloud(ctx, t, cp, 0x300, 8)
	for _, b := range builds {
		if err := <-b; err != nil {
			t.Fatal(err)
		}
	}
	k := &kubelet{cp: cp, dir: dir}
	em := &emulator{k: k, images: map[string]string{firstImage: firstBin, nextImage: nextBin}, stockBin: stockBin}
	lw := watchLease(ctx, t, cp)
	nodes := newNodes(cp)
	untouched := nodeRecord{}
	var windows []string
	phase("images built; ec2sim up")

	// 1. The stock chart, as TestE2ECutover installs it, leading.
	stockValues := map[string]any{
		"args":              []any{"--v=2", "--cloud-provider=aws", "--cloud-config=/etc/aws/cloud.conf", "--configure-cloud-routes=false"},
		"extraVolumes":      []any{map[string]any{"name": "aws-cloud-config", "configMap": map[string]any{"name": "aws-cloud-config"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "aws-cloud-config", "mountPath": "/etc/aws", "readOnly": true}},
	}
	helm.install(t, stockRelease, stockChart, stockValues)
	em.syncDaemonSet(ctx, t, stockRelease)
	stockLeader := lw.waitHolder(ctx, t, "the stock CCM leads", func(h string) bool { return h != "" })
	nodes.add(ctx, t, nodeNames[0])
	nodes.waitInitialized(ctx, t, nodeNames[0], em.stock)
	untouched.add(ctx, t, cp, nodeNames[0])
	phase("stock CCM leads; node 1 initialised by it")

	// cloudgate from the packaged chart, beside it: waiting.
	cgValues := map[string]any{"image": map[string]any{"repository": repo}, "upstream": map[string]any{"name": "aws-batch", "cloudConfig": awsConf}}
	rev1 := helm.install(t, cloudgateRelease, rel.chart, cgValues)
	if rev1.Chart.Metadata.Version != strings.TrimPrefix(relChart.Metadata.AppVersion, "v") {
		t.Errorf("installed chart version %s, appVersion %s: want the version without its v", rev1.Chart.Metadata.Version, relChart.Metadata.AppVersion)
	}
	em.rollDeployment(ctx, t, workloadName)
	if n := len(em.pods); n != 2 {
		t.Fatalf("cloudgate runs %d Pods, want the default 2 replicas", n)
	}
	em.checkImages(t, firstImage, relChart.Metadata.AppVersion)
	time.Sleep(2 * cutoverPoll)
	if h := lw.holder(); h != stockLeader {
		t.Fatalf("the Lease went from the stock CCM (%q) to %q while the stock CCM ran", stockLeader, h)
	}
	phase("cloudgate " + relChart.Metadata.Version + " (packaged) installed, waiting")

	// The stock release scaled to zero by its values: still installed, its DaemonSet on no Node.
	saved := filepath.Join(dir, "stock-values.yaml")
	helm.getValuesYAML(t, stockRelease, saved)
	disabled := maps.Clone(stockValues)
	disabled["nodeSelector"] = map[string]any{stockDisabledLabel: "true"}
	helm.upgrade(t, stockRelease, stockChart, disabled)
	stopped := em.syncDaemonSet(ctx, t, stockRelease)
	if len(em.stock) != 0 {
		t.Fatalf("the stock DaemonSet with nodeSelector %s=true still has %d Pods", stockDisabledLabel, len(em.stock))
	}
	if _, err := cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, stockRelease, metav1.GetOptions{}); err != nil {
		t.Fatalf("the stock DaemonSet after scaling to zero: %v (want it kept, with no Pod)", err)
	}
	cgLeader := lw.waitHolder(ctx, t, "cloudgate leads", func(h string) bool { return h != "" && h != stockLeader })
	if em.podOf(t, cgLeader) == nil {
		t.Fatalf("the Lease holder %q after the stock DaemonSet went to zero is no cloudgate Pod", cgLeader)
	}
	lw.handover(t, "scale-to-zero cut-over (stock -> cloudgate)", stockLeader, cgLeader, stopped)
	nodes.add(ctx, t, nodeNames[1])
	nodes.waitInitialized(ctx, t, nodeNames[1], em.procs())
	untouched.add(ctx, t, cp, nodeNames[1])
	untouched.check(ctx, t, cp, "after the scale-to-zero cut-over")
	phase("stock at zero (release kept); cloudgate leads; node 2")

	// 2. A config change: the checksum rolls the Pods.
	mark := time.Now()
	cfgValues := maps.Clone(cgValues)
	cfgValues["cloudgate"] = map[string]any{"cache": map[string]any{"negativeTTL": "45s"}}
	before := em.template(ctx, t, workloadName)
	rev2 := helm.upgrade(t, cloudgateRelease, rel.chart, cfgValues)
	after := em.template(ctx, t, workloadName)
	sumBefore, sumAfter := before.Annotations["checksum/config"], after.Annotations["checksum/config"]
	if sumBefore == "" || sumBefore == sumAfter {
		t.Fatalf("revision %d: checksum/config %q -> %q: a config change must change the Pod template's checksum", rev2.Version, sumBefore, sumAfter)
	}
	old := em.pods
	em.rollDeployment(ctx, t, workloadName)
	em.checkRolled(t, old, "the config change")
	for _, p := range em.pods {
		if len(grep(t, p.ccmProc, `effective configuration.*negativeTTL\W+45s`)) == 0 {
			t.Errorf("%s after the config change: its effective configuration has no negativeTTL 45s:\n%s", p.name, e2e.Tail(p.proc.Log, 20))
		}
	}
	em.waitLeader(ctx, t, lw)
	windows = append(windows, lw.leaderless(t, "config rollout", mark))
	untouched.check(ctx, t, cp, "after the config rollout")
	phase(fmt.Sprintf("helm upgrade (config): revision %d rolled both Pods", rev2.Version))

	// 3. An image tag change.
	mark = time.Now()
	imgValues := maps.Clone(cfgValues)
	imgValues["image"] = map[string]any{"repository": repo, "tag": nextTag}
	rev3 := helm.upgrade(t, cloudgateRelease, rel.chart, imgValues)
	old = em.pods
	em.rollDeployment(ctx, t, workloadName)
	em.checkRolled(t, old, "the image change")
	em.checkImages(t, nextImage, nextTag)
	em.waitLeader(ctx, t, lw)
	windows = append(windows, lw.leaderless(t, "image rollout", mark))
	nodes.add(ctx, t, nodeNames[2])
	nodes.waitInitialized(ctx, t, nodeNames[2], em.procs())
	untouched.add(ctx, t, cp, nodeNames[2])
	untouched.check(ctx, t, cp, "after the image rollout")
	phase(fmt.Sprintf("helm upgrade (image): revision %d rolled; node 3", rev3.Version))

	// A bad config: a cloudConfig without KubernetesClusterID passes the chart's schema
	// (it is the upstream's own text) and the AWS provider refuses it at start.
	leader := lw.holder()
	badValues := maps.Clone(imgValues)
	badConf := strings.Replace(awsConf, "KubernetesClusterID = "+cutoverCluster+"\n", "", 1)
	if badConf == awsConf {
		t.Fatal("the bad cloudConfig is the good one")
	}
	badValues["upstream"] = map[string]any{"name": "aws-batch", "cloudConfig": badConf}
	rev4 := helm.upgrade(t, cloudgateRelease, rel.chart, badValues)
	old = em.pods
	failed, _ := em.rollDeploymentStalls(ctx, t, workloadName, 90*time.Second, true)
	for _, p := range old {
		if done, err := p.proc.Exited(); done {
			t.Errorf("%s (revision %d) exited during the rollout to a bad config: %v", p.name, rev3.Version, err)
		}
	}
	if h := lw.holder(); h != leader || em.podOf(t, h) == nil {
		t.Errorf("the Lease went from %q to %q during the rollout to a bad config, want it kept by the old Pod", leader, h)
	}
	nodes.add(ctx, t, nodeNames[5])
	nodes.waitInitialized(ctx, t, nodeNames[5], em.procs())
	untouched.add(ctx, t, cp, nodeNames[5])
	untouched.check(ctx, t, cp, "during the rollout to a bad config")
	helm.rollback(t, cloudgateRelease, rev3.Version)
	for _, p := range failed {
		em.stopPod(t, p, false)
	}
	em.rollDeployment(ctx, t, workloadName) // rev3's template again: nothing rolls
	for _, p := range old {
		if !slices.Contains(em.pods, p) {
			t.Errorf("%s was replaced by the rollback to revision %d, want it kept", p.name, rev3.Version)
		}
	}
	if h := lw.holder(); h != leader {
		t.Errorf("the Lease went from %q to %q at the rollback of the bad config", leader, h)
	}
	phase(fmt.Sprintf("helm upgrade to a bad config (revision %d) stalled, old Pods served; rolled back; node 6", rev4.Version))

	// An upstream.name no image registers: the schema refuses it at `helm upgrade`, naming
	// the field, and the release stays at its revision (nothing to roll).
	misspelt := maps.Clone(imgValues)
	misspelt["upstream"] = map[string]any{"name": "aws-bach", "cloudConfig": awsConf}
	if _, err := helm.tryUpgrade(cloudgateRelease, rel.chart, misspelt); err == nil || !strings.Contains(err.Error(), "/upstream/name") {
		t.Errorf("helm upgrade with upstream.name aws-bach: %v, want the schema's error naming /upstream/name", err)
	} else {
		t.Logf("helm upgrade with upstream.name aws-bach refused: %v", err)
	}
	if cur := em.template(ctx, t, workloadName); !equality.Semantic.DeepEqual(cur, em.podsTmpl) {
		t.Error("the refused upgrade changed the Deployment's Pod template")
	}

	// Readiness with limits.shared (a real redis-server, killed: unreachable at its address).
	// failureMode open: the new Pods are Ready and roll, and the leader serves its floor (a
	// new Node initialised); failureMode closed: the surge Pod stays unready, /readyz naming
	// the cause, the old Pods keep running and leading; Redis back, it turns Ready and the
	// rollout completes onto members in the fleet.
	rds := fleettest.Start(t)
	rds.Kill()
	shared := func(mode string) map[string]any {
		v := maps.Clone(imgValues)
		v["redis"] = map[string]any{"address": rds.Addr, "account": "e2e-upgrade", "password": rds.Password}
		v["cloudgate"] = map[string]any{"cache": map[string]any{"negativeTTL": "45s"}, "limits": map[string]any{"shared": map[string]any{"failureMode": mode}}}
		return v
	}
	mark = time.Now()
	revOpen := helm.upgrade(t, cloudgateRelease, rel.chart, shared("open"))
	old = em.pods
	em.rollDeployment(ctx, t, workloadName)
	em.checkRolled(t, old, "failureMode open with Redis down")
	em.waitLeader(ctx, t, lw)
	windows = append(windows, lw.leaderless(t, "failureMode open rollout", mark))
	nodes.add(ctx, t, nodeNames[6])
	nodes.waitInitialized(ctx, t, nodeNames[6], em.procs())
	untouched.add(ctx, t, cp, nodeNames[6])
	if p := em.podOf(t, lw.holder()); p == nil || len(grep(t, p.ccmProc, `fleet "e2e-upgrade": Redis at .* unavailable`)) == 0 {
		t.Errorf("the leader after the failureMode open rollout logged no fallback to its local share (Redis is down)")
	}
	phase(fmt.Sprintf("failureMode open, Redis down (revision %d): Ready, rolled; node 7", revOpen.Version))

	leader = lw.holder()
	revClosed := helm.upgrade(t, cloudgateRelease, rel.chart, shared("closed"))
	old = em.pods
	_, errs := em.rollDeploymentStalls(ctx, t, workloadName, 30*time.Second, false)
	for _, err := range errs {
		for _, want := range []string{"HTTP 503", "limits.shared.failureMode is closed", "Redis at " + rds.Addr} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the unready surge Pod's /readyz: %v; want it to name %q", err, want)
			}
		}
	}
	for _, p := range old {
		if done, err := p.proc.Exited(); done {
			t.Errorf("%s (revision %d) exited while the rollout to failureMode closed stalled: %v", p.name, revOpen.Version, err)
		}
	}
	if h := lw.holder(); h != leader || em.podOf(t, h) == nil {
		t.Errorf("the Lease went from %q to %q while the surge Pod was unready, want it kept by the old Pod", leader, h)
	}
	phase(fmt.Sprintf("failureMode closed, Redis down (revision %d): the surge Pod unready, rollout stalled", revClosed.Version))
	mark = time.Now()
	rds.Restart()
	em.rollDeployment(ctx, t, workloadName) // the pending surge Pod first, once Ready
	em.checkRolled(t, old, "failureMode closed once Redis is back")
	em.waitLeader(ctx, t, lw)
	windows = append(windows, lw.leaderless(t, "failureMode closed rollout", mark))
	nodes.add(ctx, t, nodeNames[7])
	nodes.waitInitialized(ctx, t, nodeNames[7], em.procs())
	untouched.add(ctx, t, cp, nodeNames[7])
	if m, err := rds.Admin().HKeys(ctx, "cloudgate:{e2e-upgrade}:weights").Result(); err != nil || len(m) != 1 {
		t.Errorf("fleet members in Redis after the failureMode closed rollout: %q, %v; want the leader, one", m, err)
	}
	untouched.check(ctx, t, cp, "after the failureMode rollouts")
	phase(fmt.Sprintf("Redis back: revision %d Ready and rolled onto the fleet; node 8", revClosed.Version))

	// 4. helm rollback to the first revision: its image and config again.
	mark = time.Now()
	helm.rollback(t, cloudgateRelease, rev1.Version)
	if got := em.template(ctx, t, workloadName); !equality.Semantic.DeepEqual(got, before) {
		t.Errorf("after helm rollback to revision %d the Pod template differs from that revision's", rev1.Version)
	}
	old = em.pods
	em.rollDeployment(ctx, t, workloadName)
	em.checkRolled(t, old, "the rollback")
	em.checkImages(t, firstImage, relChart.Metadata.AppVersion)
	for _, p := range em.pods {
		if len(grep(t, p.ccmProc, `effective configuration.*negativeTTL\W+45s`)) > 0 {
			t.Errorf("%s after the rollback still runs revision 2's configuration", p.name)
		}
	}
	em.waitLeader(ctx, t, lw)
	windows = append(windows, lw.leaderless(t, "rollback rollout", mark))
	nodes.add(ctx, t, nodeNames[3])
	nodes.waitInitialized(ctx, t, nodeNames[3], em.procs())
	untouched.add(ctx, t, cp, nodeNames[3])
	untouched.check(ctx, t, cp, "after the rollback")
	phase(fmt.Sprintf("helm rollback to %d: rolled back; node 4", rev1.Version))

	// 5. Back to the stock CCM, GitOps-style: its values restored, then cloudgate at zero.
	vals, err := common.ReadValuesFile(saved)
	if err != nil {
		t.Fatalf("reading back `helm get values -o yaml` with -f: %v", err)
	}
	helm.upgrade(t, stockRelease, stockChart, vals.AsMap())
	em.syncDaemonSet(ctx, t, stockRelease)
	if len(em.stock) != 1 {
		t.Fatalf("the stock DaemonSet with its saved values runs %d Pods, want 1", len(em.stock))
	}
	time.Sleep(2 * cutoverPoll)
	cgLeader = lw.holder()
	if em.podOf(t, cgLeader) == nil {
		t.Fatalf("the Lease went to %q (no cloudgate Pod) while cloudgate ran", cgLeader)
	}
	zero := maps.Clone(cgValues)
	zero["replicas"] = 0
	helm.upgrade(t, cloudgateRelease, rel.chart, zero)
	stopped = time.Now()
	em.rollDeployment(ctx, t, workloadName)
	stockLeader2 := lw.waitHolder(ctx, t, "the stock CCM leads again", func(h string) bool { return h != "" && h != cgLeader })
	back := lw.handover(t, "scale-to-zero rollback (cloudgate -> stock)", cgLeader, stockLeader2, stopped)
	// cloudgate's RBAC stays (its release is installed): its Pods release the Lease on SIGTERM.
	if back >= cutoverLease-cutoverRetry {
		t.Errorf("rollback: the stock CCM led %v after cloudgate's Pods were stopped; a released Lease is taken at the next poll (< %v)", back, cutoverLease-cutoverRetry)
	}
	nodes.add(ctx, t, nodeNames[4])
	nodes.waitInitialized(ctx, t, nodeNames[4], em.stock)
	untouched.add(ctx, t, cp, nodeNames[4])
	untouched.check(ctx, t, cp, "after the rollback to the stock CCM")
	phase("stock restored by values, cloudgate at zero; node 5")

	for _, p := range em.all {
		if f := grep(t, p, `(?i)forbidden`); len(f) > 0 {
			t.Errorf("%s: the API server refused it %d times:\n%s", p.name, len(f), strings.Join(f[:min(len(f), 10)], "\n"))
		}
	}
	t.Logf("%d CCM processes run; Nodes checked unchanged %d times (%d Nodes); leaderless windows: %s",
		len(em.all), untouched.checks, len(untouched.nodes), strings.Join(windows, "; "))
}

// goBuildRaceVersion is goBuildRace with the binary stamped as version (the image tag it
// stands for), as make image stamps it.
func goBuildRaceVersion(ctx context.Context, t *testing.T, dir, out, pkg, version string) <-chan error {
	t.Helper()
	return e2e.BuildRaceIn(ctx, t, "go", dir, out, pkg, 22*time.Minute,
		"-ldflags", "-X k8s.io/component-base/version.gitVersion="+version)
}

// upgrade is `helm upgrade NAME CHART -n kube-system` with vals (the full values, as a
// GitOps repository holds them: not --reuse-values).
func (h *helmClient) upgrade(t *testing.T, name, chartPath string, vals map[string]any) *release.Release {
	t.Helper()
	rel, err := h.tryUpgrade(name, chartPath, vals)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}

// tryUpgrade is upgrade returning its error (the schema's, for values it refuses).
func (h *helmClient) tryUpgrade(name, chartPath string, vals map[string]any) (*release.Release, error) {
	ch, err := loader.Load(chartPath)
	if err != nil {
		return nil, err
	}
	u := action.NewUpgrade(h.cfg)
	u.Namespace = "kube-system"
	u.WaitStrategy, u.Timeout = kube.HookOnlyStrategy, 2*time.Minute
	r, err := u.Run(name, ch, vals)
	if err != nil {
		return nil, fmt.Errorf("helm upgrade %s %s: %w", name, chartPath, err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("helm upgrade %s: release of type %T", name, r)
	}
	return rel, nil
}

// rollback is `helm rollback NAME REVISION -n kube-system`.
func (h *helmClient) rollback(t *testing.T, name string, revision int) {
	t.Helper()
	r := action.NewRollback(h.cfg)
	r.Version = revision
	r.WaitStrategy, r.Timeout = kube.HookOnlyStrategy, 2*time.Minute
	if err := r.Run(name); err != nil {
		t.Fatalf("helm rollback %s %d: %v", name, revision, err)
	}
}

// emPod is one emulated Pod: a process started from a Pod template.
type emPod struct {
	*ccmProc
	image   string
	started time.Time
	// securePort is its --secure-port; ports maps each port of its template that it serves
	// (the secure port, /readyz's) to the local one it listens on.
	securePort int
	ports      map[int]int
}

// emulator stands in for the Deployment and DaemonSet controllers and the kubelet (see
// TestE2EUpgrade).
type emulator struct {
	k        *kubelet
	images   map[string]string // image reference -> binary
	stockBin string

	pods     []*emPod               // cloudgate's Deployment's Pods
	podsTmpl corev1.PodTemplateSpec // the template they run
	// pending are surge Pods of a newer template that were not ready when a rollout
	// stalled (rollDeploymentStalls) and still run: the rollout goes on with them first.
	pending   []*emPod
	stock     []*ccmProc // the stock DaemonSet's Pod (0 or 1)
	stockTmpl corev1.PodTemplateSpec
	all       []*ccmProc // every process ever started
}

func (em *emulator) procs() []*ccmProc {
	var out []*ccmProc
	for _, p := range em.pods {
		out = append(out, p.ccmProc)
	}
	return out
}

func (em *emulator) template(ctx context.Context, t *testing.T, name string) corev1.PodTemplateSpec {
	t.Helper()
	d, err := em.k.cp.Admin.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d.Spec.Template
}

// syncDaemonSet brings the stock DaemonSet's Pod in line with its stored spec: one Pod on
// the emulated control-plane node when its nodeSelector matches that node, none otherwise,
// a new one when the template changed (RollingUpdate, maxUnavailable 1: the old Pod first).
// It returns when the last Pod it stopped was sent SIGTERM.
func (em *emulator) syncDaemonSet(ctx context.Context, t *testing.T, name string) time.Time {
	t.Helper()
	ds, err := em.k.cp.Admin.AppsV1().DaemonSets("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := ds.Spec.Template
	want := 0
	if selects(tmpl.Spec.NodeSelector, emulatedControlPlaneNode) {
		want = 1
	}
	var stopped time.Time
	if len(em.stock) > 0 && (want == 0 || !equality.Semantic.DeepEqual(tmpl, em.stockTmpl)) {
		stopped = time.Now()
		for _, p := range em.stock {
			p.proc.Terminate(t)
			_ = p.proc.WaitExit(30 * time.Second) // the stock CCM exits on SIGTERM without releasing the Lease
		}
		em.stock = nil
	}
	if want == 1 && len(em.stock) == 0 {
		em.stock = em.k.run(ctx, t, "DaemonSet", name, em.stockBin)
		em.all = append(em.all, em.stock...)
	}
	em.stockTmpl = tmpl
	return stopped
}

// selects reports whether a nodeSelector matches a node's labels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// rollDeployment brings cloudgate's Pods in line with the stored Deployment, as the
// Deployment controller would: a new template rolls in RollingUpdate steps; the same
// template only scales to spec.replicas.
func (em *emulator) rollDeployment(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	d, replicas, surge, unavailable := em.deployment(ctx, t, name)
	tmpl := d.Spec.Template
	if equality.Semantic.DeepEqual(tmpl, em.podsTmpl) {
		// Same template: scale only (newest Pods go first).
		for len(em.pods) > replicas {
			em.stopPod(t, em.pods[len(em.pods)-1], true)
			em.pods = em.pods[:len(em.pods)-1]
		}
		for len(em.pods) < replicas {
			em.pods = append(em.pods, em.startPod(ctx, t, name, d))
		}
		return
	}
	// A copy: the caller keeps its slice of the old Pods (slices.DeleteFunc below zeroes).
	old := slices.Clone(em.pods)
	em.pods, em.podsTmpl = nil, tmpl
	t.Logf("%s: rolling %d Pods to a new template (replicas %d, maxSurge %d, maxUnavailable %d, minReadySeconds %d)",
		name, len(old), replicas, surge, unavailable, d.Spec.MinReadySeconds)
	for steps := 0; len(em.pods) < replicas || len(old) > 0; steps++ {
		if steps > 4*(replicas+len(old))+4 {
			t.Fatalf("%s: the rollout does not progress (replicas %d, maxSurge %d, maxUnavailable %d)", name, replicas, surge, unavailable)
		}
		// Scale up the new Pods within replicas + maxSurge...
		for len(em.pods) < replicas && len(em.pods)+len(old) < replicas+surge {
			em.pods = append(em.pods, em.startPod(ctx, t, name, d))
		}
		// ...and down the old ones while replicas - maxUnavailable stay available (every
		// running Pod here is available: startPod returns once it is).
		for len(old) > 0 && (len(em.pods)+len(old)-1 >= replicas-unavailable || len(em.pods) >= replicas) {
			newest := old[len(old)-1]
			for _, p := range old {
				if p.started.After(newest.started) {
					newest = p
				}
			}
			em.stopPod(t, newest, true)
			old = slices.DeleteFunc(old, func(p *emPod) bool { return p == newest })
		}
	}
}

// deployment reads the stored Deployment: its spec.replicas (1 when unset) and its
// RollingUpdate steps as Pod counts.
func (em *emulator) deployment(ctx context.Context, t *testing.T, name string) (d *appsv1.Deployment, replicas, surge, unavailable int) {
	t.Helper()
	d, err := em.k.cp.Admin.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas = 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	surge, unavailable = rollingParams(t, d, replicas)
	return d, replicas, surge, unavailable
}

// rollingParams returns a Deployment's maxSurge and maxUnavailable as Pod counts, rounded
// as the Deployment controller rounds them (surge up, unavailable down).
func rollingParams(t *testing.T, d *appsv1.Deployment, replicas int) (int, int) {
	t.Helper()
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0, replicas
	}
	def := intstr.FromString("25%")
	surgeV, unavailV := &def, &def
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			surgeV = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			unavailV = ru.MaxUnavailable
		}
	}
	surge, err := intstr.GetScaledValueFromIntOrPercent(surgeV, replicas, true)
	if err != nil {
		t.Fatal(err)
	}
	unavailable, err := intstr.GetScaledValueFromIntOrPercent(unavailV, replicas, false)
	if err != nil {
		t.Fatal(err)
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1 // the controller's own rule when both round to zero
	}
	return surge, unavailable
}

// startPod starts one Pod of the Deployment from its current template (or takes the first
// pending one) and returns once it is available: /healthz served, the readinessProbe (if any) answered without credentials
// as the kubelet probes, and minReadySeconds passed.
func (em *emulator) startPod(ctx context.Context, t *testing.T, name string, d *appsv1.Deployment) *emPod {
	t.Helper()
	var p *emPod
	if len(em.pending) > 0 {
		p, em.pending = em.pending[0], em.pending[1:]
	} else {
		p = em.launchPod(ctx, t, name, d)
	}
	p.proc.WaitServing(ctx, t, p.securePort, em.k.cp.AdminToken, 3*time.Minute)
	if err := readiness(ctx, p, d, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if d.Spec.MinReadySeconds > 0 {
		time.Sleep(time.Duration(d.Spec.MinReadySeconds) * time.Second)
	}
	p.started = time.Now()
	return p
}

// launchPod starts one Pod's process from the Deployment's current template, on a free
// secure port (and a free /readyz port when the template serves one).
func (em *emulator) launchPod(ctx context.Context, t *testing.T, name string, d *appsv1.Deployment) *emPod {
	t.Helper()
	spec := d.Spec.Template.Spec
	img := spec.Containers[0].Image
	bin, ok := em.images[img]
	if !ok {
		t.Fatalf("%s: image %q is none the test has a binary for (%v)", name, img, slices.Collect(maps.Keys(em.images)))
	}
	k := em.k
	k.n++
	pname := fmt.Sprintf("%s-%d", name, k.n)
	port := e2e.FreePort(t)
	args := k.podArgs(ctx, t, pname, spec)
	readyz, ports := localReadyz(t, args)
	ports[podSecurePort(t, args)] = port
	args = append(args, "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port), "--webhook-secure-port=0")
	args = append(args, readyz...)
	t.Logf("%s (%s): %s", pname, img, strings.Join(args, " "))
	proc := e2e.StartProcess(t, k.dir, pname, bin, args...)
	p := &emPod{ccmProc: &ccmProc{name: pname, proc: proc}, image: img, started: time.Now(), securePort: port, ports: ports}
	em.all = append(em.all, p.ccmProc)
	return p
}

// readiness polls the template's readinessProbe (if any) as the kubelet does, without
// credentials, on the port of the Pod it names, until it answers 2xx/3xx; it fails at once
// when the process has exited. Its error holds the last answer's status and body.
func readiness(ctx context.Context, p *emPod, d *appsv1.Deployment, timeout time.Duration) error {
	rp := d.Spec.Template.Spec.Containers[0].ReadinessProbe
	if rp == nil || rp.HTTPGet == nil {
		return nil
	}
	port, ok := p.ports[rp.HTTPGet.Port.IntValue()]
	if !ok {
		return fmt.Errorf("%s: the readinessProbe's port %s is none the container serves (%v: template port -> local)", p.name, rp.HTTPGet.Port.String(), p.ports)
	}
	url := fmt.Sprintf("%s://127.0.0.1:%d%s", strings.ToLower(string(rp.HTTPGet.Scheme)), port, rp.HTTPGet.Path)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	// An exited process ends the wait at once (Poll goes on through errors).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	return e2e.Poll(ctx, p.name+" readinessProbe "+url, 250*time.Millisecond, timeout, func() (bool, error) {
		if done, err := p.proc.Exited(); done {
			cancel()
			return false, fmt.Errorf("%w: exited (%v):\n%s", errExited, err, e2e.Tail(p.proc.Log, 15))
		}
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		return resp.StatusCode >= 200 && resp.StatusCode < 400, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	})
}

// errExited marks a Pod whose process ended before it became ready.
var errExited = errors.New("the Pod's process ended")

// rollDeploymentStalls is rollDeployment for a template whose Pods never become ready:
// it starts the surge Pods the Deployment allows and waits up to within for each; as the
// Deployment controller does, it stops an old Pod only within maxUnavailable, which must
// be 0 (else a bad config would take old Pods down before any new one is ready). A Pod
// must have exited (a config the CCM refuses) when exits is set, else still run unready
// (one that could not serve); those stay pending, and the next rollDeployment of that
// template goes on with them. It returns the Pods and why each is not ready, and keeps
// em.pods and their template as they were.
func (em *emulator) rollDeploymentStalls(ctx context.Context, t *testing.T, name string, within time.Duration, exits bool) ([]*emPod, []error) {
	t.Helper()
	d, replicas, surge, unavailable := em.deployment(ctx, t, name)
	if unavailable != 0 {
		t.Fatalf("%s: maxUnavailable rounds to %d of %d replicas: a rollout to a bad config stops that many old Pods before any new one is ready", name, unavailable, replicas)
	}
	if surge == 0 {
		t.Fatalf("%s: maxSurge 0 and maxUnavailable 0: the rollout cannot start", name)
	}
	var failed []*emPod
	var errs []error
	for range surge {
		p := em.launchPod(ctx, t, name, d)
		err := readiness(ctx, p, d, within)
		if err == nil {
			t.Fatalf("%s became ready on a config it cannot serve", p.name)
		}
		t.Logf("%s never became ready (the rollout stalls, old Pods kept): %v", p.name, err)
		switch {
		case exits && !errors.Is(err, errExited):
			t.Errorf("%s: not ready within %v but still running; want the CCM to refuse the config and exit", p.name, within)
		case !exits && errors.Is(err, errExited):
			t.Errorf("%s exited; want it running, not ready", p.name)
		case !exits:
			em.pending = append(em.pending, p)
		}
		failed, errs = append(failed, p), append(errs, err)
	}
	return failed, errs
}

// stopPod is the kubelet deleting a Pod: SIGTERM, and a wait for its exit, which must be
// clean when clean is set (a Pod that failed on its own has already exited).
func (em *emulator) stopPod(t *testing.T, p *emPod, clean bool) {
	t.Helper()
	if done, _ := p.proc.Exited(); !done {
		p.proc.Terminate(t)
	}
	if err := p.proc.WaitExit(30 * time.Second); err != nil && clean {
		t.Errorf("%s after SIGTERM: %v (want exit status 0)", p.name, err)
	}
}

// checkRolled fails unless every Pod now running is new (none of old).
func (em *emulator) checkRolled(t *testing.T, old []*emPod, what string) {
	t.Helper()
	if len(em.pods) == 0 {
		t.Fatalf("%s: no Pod runs", what)
	}
	for _, p := range em.pods {
		if slices.Contains(old, p) {
			t.Errorf("%s did not roll %s: the Pod template stayed the same", what, p.name)
		}
	}
	for _, p := range old {
		if done, _ := p.proc.Exited(); !done {
			t.Errorf("%s: old Pod %s still runs", what, p.name)
		}
	}
}

// checkImages checks that every Pod runs image and that its binary says it is version (the
// "Version: vX.Y.Z" line k8s.io/cloud-provider's app logs at start).
func (em *emulator) checkImages(t *testing.T, image, version string) {
	t.Helper()
	for _, p := range em.pods {
		if p.image != image {
			t.Errorf("%s runs image %s, want %s", p.name, p.image, image)
		}
		if len(grep(t, p.ccmProc, `\] Version: `+regexp.QuoteMeta(version)+`$`)) == 0 {
			t.Errorf("%s: its log has no Version line naming %s:\n%s", p.name, version, e2e.Tail(p.proc.Log, 20))
		}
	}
}

// podOf returns the running cloudgate Pod whose identity is the Lease holder h (each logs
// its identity while it waits), or nil.
func (em *emulator) podOf(t *testing.T, h string) *emPod {
	if h == "" {
		return nil
	}
	for _, p := range em.pods {
		if len(grep(t, p.ccmProc, regexp.QuoteMeta(strconv.Quote(h)))) > 0 {
			return p
		}
	}
	return nil
}

// waitLeader waits until a Pod of the new set holds the Lease.
func (em *emulator) waitLeader(ctx context.Context, t *testing.T, lw *leaseWatch) {
	t.Helper()
	lw.waitHolder(ctx, t, "a new cloudgate Pod leads", func(h string) bool { return em.podOf(t, h) != nil })
}

// leaderless fails the test if a hand-over of the Lease acquired after from left it without
// a live holder for longer than one lease duration: a holder's lease ends at its release
// (the holder emptied) or else at its last renewal plus its duration, and the window runs
// to the next holder's acquire time. It logs the windows and returns them as one line.
func (lw *leaseWatch) leaderless(t *testing.T, what string, from time.Time) string {
	t.Helper()
	lw.mu.Lock()
	defer lw.mu.Unlock()
	var windows []time.Duration
	var ended time.Time
	prev := ""
	for i, r := range lw.records {
		switch {
		case r.holder == "":
			if prev != "" {
				ended = r.renew // released
			}
		case r.holder != prev:
			if i > 0 && prev != "" {
				ended = lw.records[i-1].renew.Add(lw.records[i-1].duration) // waited out
			}
			if !ended.IsZero() && r.acquire.After(from) {
				windows = append(windows, max(0, r.acquire.Sub(ended)))
			}
		}
		prev = r.holder
	}
	var parts []string
	for _, w := range windows {
		parts = append(parts, fmt.Sprintf("%.2fs", w.Seconds()))
		if w > cutoverLease {
			t.Errorf("%s: leaderless for %v, longer than the lease duration %v", what, w, cutoverLease)
		}
	}
	if len(windows) == 0 {
		t.Errorf("%s: the Lease never changed hands; the rollout stops every old Pod, the leader too", what)
	}
	t.Logf("leaderless windows of the %s (bound: lease duration %v): %s", what, cutoverLease, strings.Join(parts, ", "))
	return fmt.Sprintf("%s [%s]", what, strings.Join(parts, " "))
}

// nodeRecord keeps each initialised Node's providerID, labels and taints.
type nodeRecord struct {
	nodes  map[string]corev1.Node
	checks int
}

func (n *nodeRecord) add(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, name string) {
	t.Helper()
	node, err := cp.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.nodes == nil {
		n.nodes = map[string]corev1.Node{}
	}
	n.nodes[name] = *node
}

// check fails the test if any recorded Node's providerID, labels or taints changed.
func (n *nodeRecord) check(ctx context.Context, t *testing.T, cp *e2e.ControlPlane, when string) {
	t.Helper()
	for name, was := range n.nodes {
		node, err := cp.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: node %s: %v", when, name, err)
		}
		if node.Spec.ProviderID != was.Spec.ProviderID {
			t.Errorf("%s: node %s providerID %q, was %q", when, name, node.Spec.ProviderID, was.Spec.ProviderID)
		}
		if !maps.Equal(node.Labels, was.Labels) {
			t.Errorf("%s: node %s labels %v, were %v", when, name, node.Labels, was.Labels)
		}
		if !equality.Semantic.DeepEqual(node.Spec.Taints, was.Spec.Taints) {
			t.Errorf("%s: node %s taints %v, were %v", when, name, node.Spec.Taints, was.Spec.Taints)
		}
		n.checks++
	}
}
