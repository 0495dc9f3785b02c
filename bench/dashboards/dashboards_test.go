package dashboards_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/cloudgate/cloudgate/dashboards"
	"github.com/cloudgate/cloudgate/metrics"
)

// The dashboard, the rules and their docs live in the core module (dashboards/, docs/); their
// tests live here, in the bench module, because they need the Prometheus PromQL parser and
// simcloud, which the core module does not depend on.
const (
	repoRoot = "../.."            // the repository's root
	dashDir  = "../../dashboards" // cloudgate.json, alerts.yaml, alerts_test.yaml
)

// Grafana dashboard, the parts the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []templateVar `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int        `json:"id"`
	Type        string     `json:"type"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Datasource  datasource `json:"datasource"`
	GridPos     struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // a collapsed row's panels
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID        string     `json:"refId"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	Datasource   datasource `json:"datasource"`
}

type templateVar struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Datasource *datasource     `json:"datasource"`
	IncludeAll bool            `json:"includeAll"`
	AllValue   string          `json:"allValue"`
}

// Prometheus rules file.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// testProvider is what $provider becomes in the tests: the provider label of
// a cloudgate in front of simcloud.
const testProvider = "simcloud"

// testCluster is what $cluster becomes in the tests: the variable's "All"
// value, which also matches series without a cluster label (a Prometheus per
// cluster adds none).
const testCluster = ".*"

// rateInterval is what $__rate_interval becomes (Grafana: at least four
// scrape intervals; the e2e test scrapes every second).
const rateInterval = "5s"

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(dashboards.Dashboard)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("cloudgate.json: %v", err)
	}
	return d
}

func loadRules(t *testing.T) ruleFile {
	t.Helper()
	var f ruleFile
	if err := yaml.UnmarshalStrict(dashboards.Alerts, &f); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	return f
}

// panels returns the dashboard's panels that query, rows flattened.
func (d dashboard) queryPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// substitute replaces the dashboard's template variables as Grafana would
// for one provider.
func substitute(expr string) string {
	return strings.NewReplacer(
		"${provider}", testProvider, "$provider", testProvider,
		"${cluster}", testCluster, "$cluster", testCluster,
		"$__rate_interval", rateInterval, "${__rate_interval}", rateInterval,
	).Replace(expr)
}

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

// exportedMetrics is every series name cloudgate exports, read from the
// metrics package's collectors registered in a fresh registry: each Desc's
// name, plus _bucket, _sum and _count for histograms.
func exportedMetrics(t *testing.T) (names map[string]bool, families []string) {
	t.Helper()
	m := metrics.New()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg); err != nil {
		t.Fatalf("register metrics.New(): %v", err)
	}
	names = map[string]bool{}
	for _, c := range m.Collectors() {
		_, histogram := c.(*prometheus.HistogramVec)
		if _, ok := c.(prometheus.Histogram); ok {
			histogram = true
		}
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			sm := fqNameRE.FindStringSubmatch(d.String())
			if sm == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			families = append(families, sm[1])
			if histogram {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					names[sm[1]+s] = true
				}
			} else {
				names[sm[1]] = true
			}
		}
	}
	if len(families) < 20 {
		t.Fatalf("only %d metric families described: %v", len(families), families)
	}
	sort.Strings(families)
	return names, families
}

// metricNames parses expr with the PromQL parser and returns the metric
// names its selectors name. A selector without a fixed name is an error.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s has no fixed metric name", vs)
		}
		names = append(names, name)
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("selects no metric")
	}
	return names, nil
}

func TestDashboardExpressions(t *testing.T) {
	exported, families := exportedMetrics(t)
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard needs a uid and a title")
	}
	used := map[string]bool{}
	ids := map[int]string{}
	titles := map[string]bool{}
	ps := d.queryPanels()
	if len(ps) < 10 {
		t.Fatalf("only %d panels", len(ps))
	}
	for _, p := range ps {
		if prev, dup := ids[p.ID]; dup {
			t.Errorf("panel %q reuses id %d of %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if titles[p.Title] {
			t.Errorf("two panels titled %q", p.Title)
		}
		titles[p.Title] = true
		if p.Description == "" {
			t.Errorf("panel %q has no description", p.Title)
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource uid %q, want the template variable ${datasource}", p.Title, p.Datasource.UID)
		}
		if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q query %s: datasource uid %q, want ${datasource}", p.Title, tg.RefID, tg.Datasource.UID)
			}
			if !strings.Contains(tg.Expr, `provider=~"$provider"`) {
				t.Errorf("panel %q query %s does not filter on the provider variable: %s", p.Title, tg.RefID, tg.Expr)
			}
			if strings.Count(tg.Expr, `cluster=~"$cluster"`) != strings.Count(tg.Expr, `provider=~"$provider"`) {
				t.Errorf("panel %q query %s: not every selector filters on the cluster variable: %s", p.Title, tg.RefID, tg.Expr)
			}
			expr := substitute(tg.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q query %s: unknown variable left in %s", p.Title, tg.RefID, expr)
				continue
			}
			names, err := metricNames(expr)
			if err != nil {
				t.Errorf("panel %q query %s: %v\n%s", p.Title, tg.RefID, err, expr)
				continue
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("panel %q query %s names %s, which cloudgate does not export", p.Title, tg.RefID, n)
				}
				used[n] = true
			}
		}
	}
	// Every metric family is on the dashboard.
	for _, f := range families {
		if !used[f] && !used[f+"_bucket"] && !used[f+"_sum"] && !used[f+"_count"] {
			t.Errorf("metric %s is on no panel", f)
		}
	}

	// Template variables: the data source, and the provider read from a metric cloudgate exports.
	vars := map[string]templateVar{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if v, ok := vars["datasource"]; !ok || v.Type != "datasource" || string(v.Query) != `"prometheus"` {
		t.Errorf("want a datasource variable of type datasource and query prometheus, got %+v", v)
	}
	v, ok := vars["provider"]
	if !ok || v.Type != "query" || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
		t.Fatalf("want a provider query variable on ${datasource}, got %+v", v)
	}
	m := regexp.MustCompile(`^label_values\((\w+)\{cluster=~"\$cluster"\}, provider\)$`).FindStringSubmatch(v.Definition)
	if m == nil {
		t.Fatalf("provider variable: want label_values(<metric>{cluster=~\"$cluster\"}, provider), got %q", v.Definition)
	}
	if !exported[m[1]] {
		t.Errorf("provider variable reads %s, which cloudgate does not export", m[1])
	}
	var q struct{ Query string }
	if err := json.Unmarshal(v.Query, &q); err != nil || q.Query != v.Definition {
		t.Errorf("provider variable: query %s does not match its definition %q", v.Query, v.Definition)
	}

	// The cluster: read from the same metric; "All" must match series
	// without the label too (a Prometheus per cluster adds none).
	c, ok := vars["cluster"]
	if !ok || c.Type != "query" || c.Datasource == nil || c.Datasource.UID != "${datasource}" {
		t.Fatalf("want a cluster query variable on ${datasource}, got %+v", c)
	}
	if want := "label_values(" + m[1] + ", cluster)"; c.Definition != want {
		t.Errorf("cluster variable: definition %q, want %q", c.Definition, want)
	}
	if c.AllValue != ".*" || !c.IncludeAll {
		t.Errorf("cluster variable: includeAll %v allValue %q, want true and .* (which matches an absent label)", c.IncludeAll, c.AllValue)
	}
	if err := json.Unmarshal(c.Query, &q); err != nil || q.Query != c.Definition {
		t.Errorf("cluster variable: query %s does not match its definition %q", c.Query, c.Definition)
	}
}

// externalAlertMetrics are the series alerts may name besides cloudgate's
// own: client-go's leader-election gauge, which the CCM binary exports
// (cmd/ccm imports component-base's clientgo metrics), and
// kube-state-metrics' series: the node count, and the Lease and Pods of another CCM
// (CloudgateLeaseHeldElsewhere, CloudgateSecondCCM; docs/monitoring.md says they need
// kube-state-metrics).
var externalAlertMetrics = map[string]bool{
	"leader_election_master_status": true,
	"kube_node_info":                true,
	"kube_lease_owner":              true,
	"kube_lease_renew_time":         true,
	"kube_pod_container_info":       true,
	"kube_pod_status_phase":         true,
}

// sharedSeries are the series cloudgate exports under the same name and labels as the
// stock CCM (client-go's, component-base's): a rule must say whose it reads, by the scrape
// job (cloudgate's is "cloudgate"), or a standby would read the stock CCM's leader as its own.
var sharedSeries = map[string]bool{"leader_election_master_status": true}

// unscopedSharedSelectors returns the selectors of expr that read a shared series without
// a matcher on job="cloudgate" (= for cloudgate's, != for another CCM's).
func unscopedSharedSelectors(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var bad []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok || !sharedSeries[vs.Name] {
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == "job" && m.Value == "cloudgate" && (m.Type == labels.MatchEqual || m.Type == labels.MatchNotEqual) {
				return nil
			}
		}
		bad = append(bad, vs.String())
		return nil
	})
	return bad, nil
}

// recordingRuleName is Prometheus' naming convention for recorded series,
// level:metric:operations, which keeps them apart from scraped ones.
var recordingRuleName = regexp.MustCompile(`^[a-z_]+:[a-z_]+:[a-z_]+$`)

func TestAlertRules(t *testing.T) {
	exported, _ := exportedMetrics(t)
	f := loadRules(t)
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Recording rules name what several alerts read (who leads, the Lease's age, another
	// CCM's Pods): a rule may read only the ones recorded before it in its group, which
	// Prometheus evaluates in order, so every alert sees this evaluation's values.
	recorded := map[string]bool{}
	alerts := map[string]rule{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if bad, _ := unscopedSharedSelectors(r.Expr); len(bad) > 0 {
				t.Errorf("rule %s%s reads %v without job=\"cloudgate\" or job!=\"cloudgate\": the stock CCM exports it too", r.Alert, r.Record, bad)
			}
			if r.Alert == "" {
				names, err := metricNames(r.Expr)
				if err != nil {
					t.Errorf("record %s: %v\n%s", r.Record, err, r.Expr)
				}
				for _, n := range names {
					if !exported[n] && !externalAlertMetrics[n] && !recorded[n] {
						t.Errorf("record %s names %s, which neither cloudgate nor an earlier rule exports", r.Record, n)
					}
				}
				if !recordingRuleName.MatchString(r.Record) || recorded[r.Record] {
					t.Errorf("group %s: record %q: want a new level:metric:operations name", g.Name, r.Record)
				}
				recorded[r.Record] = true
				continue
			}
			if _, dup := alerts[r.Alert]; dup {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			alerts[r.Alert] = r
			names, err := metricNames(r.Expr)
			if err != nil {
				t.Errorf("alert %s: %v\n%s", r.Alert, err, r.Expr)
			}
			for _, n := range names {
				if !exported[n] && !externalAlertMetrics[n] && !recorded[n] {
					t.Errorf("alert %s names %s, which neither cloudgate nor an earlier recording rule exports", r.Alert, n)
				}
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", r.Alert)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s needs a summary and a description", r.Alert)
			}
			anchor := strings.ToLower(r.Alert)
			if want := "docs/monitoring.md#" + anchor; !strings.HasSuffix(r.Annotations["runbook_url"], want) {
				t.Errorf("alert %s: runbook_url %q, want one ending in %s", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(r.Alert) + `$`).Match(doc) {
				t.Errorf("docs/monitoring.md has no heading %q (the runbook the alert links to)", r.Alert)
			}
		}
	}
	// The alerts an operator needs: quota, throttling, breaker, cache.
	for _, want := range []string{
		"CloudgateQuotaUtilizationHigh", "CloudgateThrottled", "CloudgateBreakerOpen", "CloudgateCacheHitRatioCollapse",
	} {
		if _, ok := alerts[want]; !ok {
			t.Errorf("alert %s is missing", want)
		}
	}
	for _, name := range []string{"CloudgateQuotaUtilizationHigh", "CloudgateCacheHitRatioCollapse"} {
		if r, ok := alerts[name]; ok && r.For == "" {
			t.Errorf("alert %s must hold for some minutes (for:)", name)
		}
	}
}

// TestPanelsDocumented: docs/monitoring.md describes every panel.
func TestPanelsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "monitoring.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range loadDashboard(t).queryPanels() {
		if !strings.Contains(string(doc), "**"+p.Title+"**") {
			t.Errorf("docs/monitoring.md does not describe panel %q (want **%s**)", p.Title, p.Title)
		}
	}
}

// underMake reports whether the test runs under `make test` or CI, where the
// Makefile's setup step has installed the Debian packages: a missing tool
// is then a failure, not a skip.
func underMake() bool {
	return os.Getenv("CLOUDGATE_CACHE_DIR") != "" || os.Getenv("CI") != ""
}

// tool returns the path of a binary from the Debian prometheus package,
// skipping the test when it is missing outside make/CI.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if _, err := os.Stat("/usr/bin/" + name); err == nil {
		return "/usr/bin/" + name
	}
	msg := fmt.Sprintf("%s not found: install the Debian package prometheus (make setup, or bash .ci/setup.sh)", name)
	if underMake() {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool := tool(t, "promtool")
	out, err := exec.Command(promtool, "check", "rules", filepath.Join(dashDir, "alerts.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules alerts.yaml: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func TestPromtoolTestRules(t *testing.T) {
	promtool := tool(t, "promtool")
	out, err := exec.Command(promtool, "test", "rules", filepath.Join(dashDir, "alerts_test.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules alerts_test.yaml: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestMetricCheckCatchesMistakes: the name check rejects what it should.
func TestMetricCheckCatchesMistakes(t *testing.T) {
	exported, _ := exportedMetrics(t)
	for _, n := range []string{"cloudgate_upstream_calls_total", "cloudgate_batch_size_bucket", "cloudgate_quota_utilization_ratio"} {
		if !exported[n] {
			t.Errorf("%s should be exported", n)
		}
	}
	for _, n := range []string{"cloudgate_upstream_calls", "cloudgate_batch_size", "cloudgate_requests_total_bucket"} {
		if exported[n] {
			t.Errorf("%s should not be exported", n)
		}
	}
	if _, err := metricNames(`rate({__name__=~"cloudgate_.+"}[5m])`); err == nil {
		t.Error("a selector without a fixed name was accepted")
	}
	if _, err := metricNames(`sum(rate(cloudgate_upstream_calls_total[5m])`); err == nil {
		t.Error("a syntax error was accepted")
	}
	for expr, want := range map[string]int{
		`max(leader_election_master_status{name="cloud-controller-manager"})`:                                                  1,
		`max(leader_election_master_status{job=~"cloud.*", name="cloud-controller-manager"})`:                                  1,
		`max(leader_election_master_status{job="cloudgate"}) unless max(leader_election_master_status{job!="cloudgate"}) == 1`: 0,
	} {
		if bad, err := unscopedSharedSelectors(expr); err != nil || len(bad) != want {
			t.Errorf("unscopedSharedSelectors(%s) = %v, %v; want %d", expr, bad, err, want)
		}
	}
	names, err := metricNames(`sum({__name__="cloudgate_throttled_total"}) / sum(rate(cloudgate_requests_total[1m]))`)
	if err != nil || strings.Join(names, ",") != "cloudgate_throttled_total,cloudgate_requests_total" {
		t.Errorf("metricNames = %v, %v", names, err)
	}
}
