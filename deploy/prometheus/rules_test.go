// Package prometheus holds the Prometheus alert rules and the Alertmanager
// configuration of the maintainer (the YAML files next to this one). Its
// tests check them with promtool and amtool, keep the Kubernetes copies in
// step, and check every expression against the metrics the maintainer
// really registers.
package prometheus

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/iceberg-maintainer/maintainer/maintenance"
	"github.com/iceberg-maintainer/maintainer/metrics"
	"github.com/iceberg-maintainer/maintainer/server"
)

const (
	rulesFile              = "rules.yaml"
	prometheusRuleFile     = "prometheusrule.yaml"
	rulesTestFile          = "rules_test.yaml"
	alertmanagerFile       = "alertmanager.yaml"
	alertmanagerConfigFile = "alertmanagerconfig.yaml"

	runbookBase = "https://github.com/iceberg-maintainer/maintainer/blob/main/docs/runbooks.md#"

	// triggerLabel marks the alerts Alertmanager sends to serve's webhook.
	triggerLabel = "maintainer_trigger"
	// maintainerReceiver is the receiver that posts to /v1/alertmanager.
	maintainerReceiver = "iceberg-maintainer"
	// humanReceiver is the receiver people read Iceberg alerts from.
	humanReceiver = "iceberg-oncall"
	// tokenFile is where Alertmanager finds serve's bearer token.
	tokenFile = "/etc/alertmanager/secrets/iceberg-maintainer/token"
)

// requiredAlerts are the alert names other documents link to.
var requiredAlerts = []string{
	"IcebergTableSmallFiles",
	"IcebergTableLowAverageFileSize",
	"IcebergTableSnapshotsPilingUp",
	"IcebergTableOrphanBytesHigh",
	"IcebergTableHealthStale",
	"IcebergMaintenanceNotSucceeding",
	"IcebergMaintenanceFailing",
	"IcebergMaintenanceLeaseLost",
	"IcebergMaintenanceCommitConflicts",
	"IcebergMaintainerDown",
}

// triggerAlerts are the alerts that ask the maintainer for a task.
var triggerAlerts = map[string]string{
	"IcebergTableSmallFiles":         maintenance.TaskCompact,
	"IcebergTableLowAverageFileSize": maintenance.TaskCompact,
	"IcebergTableSnapshotsPilingUp":  maintenance.TaskExpire,
	"IcebergTableOrphanBytesHigh":    maintenance.TaskOrphans,
}

// scrapeLabels are the target labels a (Kubernetes) scrape adds to every
// series; expressions may match and group on them.
var scrapeLabels = []string{"job", "instance", "namespace", "pod"}

var severities = []string{"critical", "warning", "info"}

// --- the files ---

type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval"`
	Limit    int    `yaml:"limit"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func (r rule) name() string {
	if r.Alert != "" {
		return r.Alert
	}
	return r.Record
}

// readYAML decodes a file; strict refuses fields v does not declare.
func readYAML(t *testing.T, path string, v any, strict bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var opts []yaml.DecodeOption
	if strict {
		opts = append(opts, yaml.DisallowUnknownField())
	}
	if err := yaml.NewDecoder(f, opts...).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, rulesFile, &f, true)
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", rulesFile)
	}
	return rules
}

// --- promtool and amtool ---

// tool returns the path of a command-line tool, skipping the test when it is
// missing, unless MAINTAINER_REQUIRE_TOOLS=1 (scripts/test.sh installs the
// tools and sets it), where a missing tool fails the test.
func tool(t *testing.T, name, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s not on PATH (Debian: apt-get install --no-install-recommends %s)", name, pkg)
	if os.Getenv("MAINTAINER_REQUIRE_TOOLS") == "1" {
		t.Fatalf("%s, and MAINTAINER_REQUIRE_TOOLS=1", msg)
	}
	t.Skip(msg)
	return ""
}

// run runs a tool in the package directory and returns its combined output.
func run(t *testing.T, path string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no amtool config of the user's
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestPromtoolCheckRules(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	t.Parallel()
	// --lint-fatal: duplicate rules fail too.
	if out, err := run(t, promtool, "check", "rules", "--lint-fatal", rulesFile); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
}

func TestPromtoolTestRules(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	t.Parallel()
	if out, err := run(t, promtool, "test", "rules", rulesTestFile); err != nil {
		t.Fatalf("promtool test rules %s: %v\n%s", rulesTestFile, err, out)
	}
}

func TestAmtoolCheckConfig(t *testing.T) {
	amtool := tool(t, "amtool", "prometheus-alertmanager")
	t.Parallel()
	if out, err := run(t, amtool, "check-config", alertmanagerFile); err != nil {
		t.Fatalf("amtool check-config %s: %v\n%s", alertmanagerFile, err, out)
	}
}

// TestAlertmanagerRoutes routes every alert of rules.yaml through
// alertmanager.yaml: the trigger alerts reach the maintainer and people,
// the others people only, and anything else the default receiver.
func TestAlertmanagerRoutes(t *testing.T) {
	amtool := tool(t, "amtool", "prometheus-alertmanager")
	t.Parallel()
	type route struct {
		name   string
		labels map[string]string
		want   []string
	}
	var cases []route
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			continue
		}
		labels := map[string]string{"alertname": r.Alert, "namespace": "data", "table": "sales.orders"}
		for k, v := range r.Labels {
			labels[k] = v
		}
		want := []string{humanReceiver}
		if r.Labels[triggerLabel] == "true" {
			want = []string{maintainerReceiver, humanReceiver}
		}
		cases = append(cases, route{r.Alert, labels, want})
	}
	cases = append(cases,
		route{"other alert", map[string]string{"alertname": "KubePodCrashLooping", "namespace": "data"}, []string{"default"}},
		route{"trigger label false", map[string]string{"alertname": "Watchdog", triggerLabel: "false"}, []string{"default"}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"config", "routes", "test", "--config.file=" + alertmanagerFile,
				"--verify.receivers=" + strings.Join(c.want, ",")}
			keys := make([]string, 0, len(c.labels))
			for k := range c.labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				args = append(args, k+"="+c.labels[k])
			}
			if out, err := run(t, amtool, args...); err != nil {
				t.Fatalf("amtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		})
	}
}

// --- the Kubernetes copies ---

var update = flag.Bool("update", false, "rewrite prometheusrule.yaml's spec.groups from rules.yaml")

// updatePrometheusRule replaces what follows the `spec:` line of
// prometheusrule.yaml with rules.yaml from its `groups:` line on, indented.
func updatePrometheusRule(t *testing.T) {
	t.Helper()
	read := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	}
	crd, rules := read(prometheusRuleFile), read(rulesFile)
	spec, groups := slices.Index(crd, "spec:"), slices.Index(rules, "groups:")
	if spec < 0 || groups < 0 {
		t.Fatalf("-update needs a line %q in %s and %q in %s", "spec:", prometheusRuleFile, "groups:", rulesFile)
	}
	out := slices.Clone(crd[:spec+1])
	for _, l := range rules[groups:] {
		if l != "" {
			l = "  " + l
		}
		out = append(out, l)
	}
	if err := os.WriteFile(prometheusRuleFile, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPrometheusRuleMatchesRules keeps prometheusrule.yaml in step with
// rules.yaml; `go test ./deploy/prometheus/ -run PrometheusRule -update`
// rewrites it.
func TestPrometheusRuleMatchesRules(t *testing.T) {
	if *update {
		updatePrometheusRule(t)
	}
	var plain, crd map[string]any
	readYAML(t, rulesFile, &plain, false)
	readYAML(t, prometheusRuleFile, &crd, false)
	if crd["apiVersion"] != "monitoring.coreos.com/v1" || crd["kind"] != "PrometheusRule" {
		t.Errorf("%s: apiVersion %v kind %v, want monitoring.coreos.com/v1 PrometheusRule",
			prometheusRuleFile, crd["apiVersion"], crd["kind"])
	}
	spec, _ := crd["spec"].(map[string]any)
	if spec == nil {
		t.Fatalf("%s has no spec", prometheusRuleFile)
	}
	if !reflect.DeepEqual(plain["groups"], spec["groups"]) {
		t.Fatalf("%s spec.groups differ from %s groups (-update rewrites them):\n%s", prometheusRuleFile, rulesFile,
			firstDifference(plain["groups"], spec["groups"]))
	}
}

// firstDifference shows the first line where two values differ once
// rendered as YAML.
func firstDifference(a, b any) string {
	render := func(v any) []string {
		out, err := yaml.Marshal(v)
		if err != nil {
			return []string{err.Error()}
		}
		return strings.Split(string(out), "\n")
	}
	la, lb := render(a), render(b)
	for i := 0; i < max(len(la), len(lb)); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d of the rendered groups:\n  %s: %q\n  %s: %q", i+1, rulesFile, x, prometheusRuleFile, y)
		}
	}
	return "(they render the same)"
}

type amConfig struct {
	Route     amRoute `yaml:"route"`
	Receivers []struct {
		Name           string `yaml:"name"`
		WebhookConfigs []struct {
			URL          string `yaml:"url"`
			SendResolved *bool  `yaml:"send_resolved"`
			HTTPConfig   struct {
				Authorization struct {
					Type            string `yaml:"type"`
					CredentialsFile string `yaml:"credentials_file"`
				} `yaml:"authorization"`
			} `yaml:"http_config"`
		} `yaml:"webhook_configs"`
	} `yaml:"receivers"`
}

type amRoute struct {
	Receiver       string    `yaml:"receiver"`
	Matchers       []string  `yaml:"matchers"`
	GroupBy        []string  `yaml:"group_by"`
	GroupWait      string    `yaml:"group_wait"`
	GroupInterval  string    `yaml:"group_interval"`
	RepeatInterval string    `yaml:"repeat_interval"`
	Continue       bool      `yaml:"continue"`
	Routes         []amRoute `yaml:"routes"`
}

type amcfg struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Spec       struct {
		Route struct {
			Receiver string `yaml:"receiver"`
			Matchers []struct {
				Name      string `yaml:"name"`
				Value     string `yaml:"value"`
				MatchType string `yaml:"matchType"`
			} `yaml:"matchers"`
			GroupBy        []string `yaml:"groupBy"`
			GroupWait      string   `yaml:"groupWait"`
			GroupInterval  string   `yaml:"groupInterval"`
			RepeatInterval string   `yaml:"repeatInterval"`
			Continue       bool     `yaml:"continue"`
		} `yaml:"route"`
		Receivers []struct {
			Name           string `yaml:"name"`
			WebhookConfigs []struct {
				URL          string `yaml:"url"`
				SendResolved *bool  `yaml:"sendResolved"`
				HTTPConfig   struct {
					Authorization struct {
						Type        string `yaml:"type"`
						Credentials struct {
							Name string `yaml:"name"`
							Key  string `yaml:"key"`
						} `yaml:"credentials"`
					} `yaml:"authorization"`
				} `yaml:"httpConfig"`
			} `yaml:"webhookConfigs"`
		} `yaml:"receivers"`
	} `yaml:"spec"`
}

// TestAlertmanagerMaintainerReceiver checks what serve's webhook needs, in
// alertmanager.yaml and in its AlertmanagerConfig twin.
func TestAlertmanagerMaintainerReceiver(t *testing.T) {
	var am amConfig
	readYAML(t, alertmanagerFile, &am, false)
	var route *amRoute
	for i, r := range am.Route.Routes {
		if r.Receiver == maintainerReceiver {
			route = &am.Route.Routes[i]
			if i != 0 {
				t.Errorf("the %s route is route %d; it must come first so that no other route stops its alerts", maintainerReceiver, i)
			}
			break
		}
	}
	if route == nil {
		t.Fatalf("%s: no route to %s", alertmanagerFile, maintainerReceiver)
	}
	if want := []string{triggerLabel + `="true"`}; !slices.Equal(route.Matchers, want) {
		t.Errorf("maintainer route matchers %q, want %q", route.Matchers, want)
	}
	if !route.Continue {
		t.Error("maintainer route: continue must be true so that people see the alerts too")
	}
	if !slices.Contains(route.GroupBy, "table") {
		t.Errorf("maintainer route group_by %q lacks table: a notification must not mix tables", route.GroupBy)
	}
	var urls []string
	for _, r := range am.Receivers {
		if r.Name != maintainerReceiver {
			continue
		}
		if len(r.WebhookConfigs) != 1 {
			t.Fatalf("receiver %s: %d webhook_configs, want 1", r.Name, len(r.WebhookConfigs))
		}
		w := r.WebhookConfigs[0]
		urls = append(urls, w.URL)
		if !strings.HasSuffix(w.URL, "/v1/alertmanager") {
			t.Errorf("receiver %s url %q does not end in /v1/alertmanager", r.Name, w.URL)
		}
		if w.SendResolved == nil || *w.SendResolved {
			t.Errorf("receiver %s: send_resolved must be false (the maintainer ignores resolved alerts)", r.Name)
		}
		if got := w.HTTPConfig.Authorization.CredentialsFile; got != tokenFile {
			t.Errorf("receiver %s: credentials_file %q, want %q", r.Name, got, tokenFile)
		}
	}
	if len(urls) != 1 {
		t.Fatalf("%s: %d receivers named %s, want 1", alertmanagerFile, len(urls), maintainerReceiver)
	}

	var c amcfg
	readYAML(t, alertmanagerConfigFile, &c, false)
	if c.APIVersion != "monitoring.coreos.com/v1alpha1" || c.Kind != "AlertmanagerConfig" {
		t.Errorf("%s: apiVersion %q kind %q", alertmanagerConfigFile, c.APIVersion, c.Kind)
	}
	cr := c.Spec.Route
	if cr.Receiver != maintainerReceiver || len(cr.Matchers) != 1 || cr.Matchers[0].Name != triggerLabel ||
		cr.Matchers[0].Value != "true" || cr.Matchers[0].MatchType != "=" {
		t.Errorf("%s route: receiver %q matchers %+v, want %s and %s=\"true\"", alertmanagerConfigFile,
			cr.Receiver, cr.Matchers, maintainerReceiver, triggerLabel)
	}
	if !slices.Equal(cr.GroupBy, route.GroupBy) || cr.GroupWait != route.GroupWait ||
		cr.GroupInterval != route.GroupInterval || cr.RepeatInterval != route.RepeatInterval {
		t.Errorf("%s route grouping (%q %s %s %s) differs from %s's (%q %s %s %s)", alertmanagerConfigFile,
			cr.GroupBy, cr.GroupWait, cr.GroupInterval, cr.RepeatInterval, alertmanagerFile,
			route.GroupBy, route.GroupWait, route.GroupInterval, route.RepeatInterval)
	}
	if len(c.Spec.Receivers) != 1 || c.Spec.Receivers[0].Name != maintainerReceiver || len(c.Spec.Receivers[0].WebhookConfigs) != 1 {
		t.Fatalf("%s: want one receiver %s with one webhook", alertmanagerConfigFile, maintainerReceiver)
	}
	w := c.Spec.Receivers[0].WebhookConfigs[0]
	if w.URL != urls[0] {
		t.Errorf("%s url %q, %s has %q", alertmanagerConfigFile, w.URL, alertmanagerFile, urls[0])
	}
	if w.SendResolved == nil || *w.SendResolved {
		t.Errorf("%s: sendResolved must be false", alertmanagerConfigFile)
	}
	if a := w.HTTPConfig.Authorization; a.Credentials.Name == "" || a.Credentials.Key == "" {
		t.Errorf("%s: httpConfig.authorization.credentials must name a Secret key", alertmanagerConfigFile)
	}
}

// --- conventions of the rules ---

func TestAlertConventions(t *testing.T) {
	rules := loadRules(t)
	seen := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			t.Errorf("recording rule %s: this file holds alerts only", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if want := runbookBase + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
		if !slices.Contains(severities, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want one of %q", r.Alert, r.Labels["severity"], severities)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		task, trigger := triggerAlerts[r.Alert]
		if got := r.Labels[triggerLabel]; (got == "true") != trigger || (got != "" && got != "true") {
			t.Errorf("%s: %s=%q; only %v carry %s=\"true\"", r.Alert, triggerLabel, got, keys(triggerAlerts), triggerLabel)
		}
		if trigger {
			if r.Labels["task"] != task {
				t.Errorf("%s: task=%q, want %q", r.Alert, r.Labels["task"], task)
			}
			if !strings.Contains(r.Annotations["summary"], "{{ $labels.table }}") {
				t.Errorf("%s: the summary should name the table ({{ $labels.table }})", r.Alert)
			}
		}
		if task := r.Labels["task"]; task != "" && !slices.Contains(maintenance.TaskNames(), task) {
			// The maintainer refuses a notification whole over one bad task.
			t.Errorf("%s: task label %q is not a task (%q)", r.Alert, task, maintenance.TaskNames())
		}
	}
	for _, name := range requiredAlerts {
		if !seen[name] {
			t.Errorf("alert %s is missing (other documents link to it)", name)
		}
	}
}

// TestRulesTestCoversEveryAlert checks that rules_test.yaml shows every
// alert firing.
func TestRulesTestCoversEveryAlert(t *testing.T) {
	var f struct {
		Tests []struct {
			Name          string `yaml:"name"`
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	readYAML(t, rulesTestFile, &f, false)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, r := range loadRules(t) {
		if r.Alert != "" && !fires[r.Alert] {
			t.Errorf("%s never fires in %s", r.Alert, rulesTestFile)
		}
		if r.Alert != "" && !quiet[r.Alert] {
			t.Errorf("%s is never shown quiet in %s", r.Alert, rulesTestFile)
		}
	}
}

// --- the metrics the expressions use ---

// family is one metric family the maintainer registers.
type family struct {
	labels map[string]bool
}

// recorder is a Registerer that remembers what was registered through it.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

type stubQueue struct{}

func (stubQueue) Enqueue(context.Context, server.Request) (server.Enqueued, error) {
	return server.Enqueued{}, errors.New("stub")
}
func (stubQueue) Known(string) bool { return false }
func (stubQueue) Status() any       { return nil }

var (
	descFQName = regexp.MustCompile(`fqName: "([^"]*)"`)
	descLabels = regexp.MustCompile(`(?:constLabels|variableLabels): \{([^}]*)\}`)
)

// exportedFamilies registers the maintainer's metrics (reconciler,
// scheduler, server, plus the Go and process collectors of /metrics) and
// reads the name and labels of each from its descriptor. Prometheus' own
// `up` is added with the scrape labels.
func exportedFamilies(t *testing.T) map[string]family {
	t.Helper()
	rec := &recorder{Registerer: prometheus.NewRegistry()}
	maintenance.NewMetrics(rec, metrics.NewTables(true, 10)) // registers trigger_requests too
	cfg := server.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	if _, err := server.New(cfg, server.Deps{Queue: stubQueue{}, Tasks: maintenance.TaskNames(), Registerer: rec}); err != nil {
		t.Fatal(err)
	}
	cs := append(rec.collectors, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fams := map[string]family{"up": {labels: map[string]bool{}}}
	ch := make(chan *prometheus.Desc)
	go func() {
		for _, c := range cs {
			c.Describe(ch)
		}
		close(ch)
	}()
	for d := range ch {
		s := d.String()
		m := descFQName.FindStringSubmatch(s)
		if m == nil {
			t.Fatalf("cannot read the name of %s", s)
		}
		f := family{labels: map[string]bool{}}
		for _, l := range descLabels.FindAllStringSubmatch(s, -1) {
			for _, name := range strings.Split(l[1], ",") {
				name = strings.TrimSuffix(strings.TrimPrefix(name, "c("), ")")
				if name, _, _ = strings.Cut(name, "="); name != "" {
					f.labels[name] = true
				}
			}
		}
		fams[m[1]] = f
	}
	if _, ok := fams[metrics.Namespace+"_runs_total"]; !ok {
		t.Fatalf("descriptors read: %d, without %s_runs_total", len(fams), metrics.Namespace)
	}
	return fams
}

// lookup finds the family of a series name, including a histogram's or a
// summary's _bucket, _sum and _count series.
func lookup(fams map[string]family, name string) (family, bool) {
	if f, ok := fams[name]; ok {
		return f, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f, ok := fams[base]; ok {
				if suffix == "_bucket" {
					f = family{labels: mapWith(f.labels, "le")}
				}
				return f, true
			}
		}
	}
	return family{}, false
}

func mapWith(m map[string]bool, k string) map[string]bool {
	out := map[string]bool{k: true}
	for l := range m {
		out[l] = true
	}
	return out
}

// labelValues are the values the maintainer gives some labels; a matcher on
// them must use one of these.
func labelValues(metric, label string) []string {
	switch {
	case label == metrics.LabelTask:
		return maintenance.TaskNames()
	case label == metrics.LabelResult && metric == metrics.Namespace+"_runs_total":
		return []string{maintenance.ResultSuccess, maintenance.ResultFailure, maintenance.ResultSkipped,
			maintenance.ResultBusy, maintenance.ResultCanceled}
	}
	return nil
}

func TestExpressionsUseExportedMetrics(t *testing.T) {
	fams := exportedFamilies(t)
	for _, r := range loadRules(t) {
		t.Run(r.name(), func(t *testing.T) {
			q, err := parseQuery(r.Expr)
			if err != nil {
				t.Fatalf("%v\n%s", err, r.Expr)
			}
			if len(q.selectors) == 0 {
				t.Fatalf("no metric found in %q", r.Expr)
			}
			known := map[string]bool{}
			for _, l := range scrapeLabels {
				known[l] = true
			}
			for _, s := range q.selectors {
				f, ok := lookup(fams, s.metric)
				if !ok {
					t.Errorf("%s is not a metric the maintainer exports", s.metric)
					continue
				}
				for l := range f.labels {
					known[l] = true
				}
				tableFiltered := false
				for _, m := range s.matchers {
					if !f.labels[m.name] && !slices.Contains(scrapeLabels, m.name) {
						t.Errorf("%s has no label %q (labels: %v; scrape labels: %v)", s.metric, m.name, keys(f.labels), scrapeLabels)
					}
					if m.name == metrics.LabelTable && m.op == "!=" && m.value == metrics.OtherTables {
						tableFiltered = true
					}
					allowed := labelValues(s.metric, m.name)
					if allowed == nil {
						continue
					}
					values := []string{m.value}
					if m.op == "=~" || m.op == "!~" {
						values = strings.Split(m.value, "|")
					}
					for _, v := range values {
						if !slices.Contains(allowed, v) {
							t.Errorf("%s{%s%s%q}: %q is not one of %q", s.metric, m.name, m.op, m.value, v, allowed)
						}
					}
				}
				if _, trigger := triggerAlerts[r.Alert]; trigger && f.labels[metrics.LabelTable] && !tableFiltered {
					t.Errorf("%s: %s must exclude table=%q (it mixes tables)", r.Alert, s.metric, metrics.OtherTables)
				}
			}
			for _, l := range q.grouping {
				if !known[l] {
					t.Errorf("grouping by %q, a label none of %v has", l, q.metrics())
				}
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// --- a small PromQL reader: enough to list selectors and grouping labels ---

type matcher struct{ name, op, value string }

type selector struct {
	metric   string
	matchers []matcher
}

type query struct {
	selectors []selector
	grouping  []string // labels of by, without, on, ignoring, group_left/right
}

func (q query) metrics() []string {
	var out []string
	for _, s := range q.selectors {
		out = append(out, s.metric)
	}
	return out
}

var (
	groupingWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true}
	aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true,
		"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
		"quantile": true, "limitk": true, "limit_ratio": true}
	operatorWords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "atan2": true,
		"inf": true, "nan": true}
	tokenRE = regexp.MustCompile(`^(?:` +
		`(?P<space>\s+)|` +
		`(?P<comment>#[^\n]*)|` +
		`(?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`" + `)|` +
		`(?P<number>[0-9][0-9a-zA-Z.]*|\.[0-9][0-9a-zA-Z]*)|` +
		`(?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)|` +
		`(?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],@]))`)
)

type token struct{ kind, text string }

func tokenize(expr string) ([]token, error) {
	var toks []token
	names := tokenRE.SubexpNames()
	for rest := expr; rest != ""; {
		m := tokenRE.FindStringSubmatchIndex(rest)
		if m == nil {
			return nil, fmt.Errorf("cannot read %q", rest)
		}
		for i := 1; i < len(names); i++ {
			if m[2*i] >= 0 {
				if k := names[i]; k != "space" && k != "comment" {
					toks = append(toks, token{k, rest[m[2*i]:m[2*i+1]]})
				}
				break
			}
		}
		rest = rest[m[1]:]
	}
	return toks, nil
}

// parseQuery lists the selectors and grouping labels of a PromQL
// expression. It is not a full parser: it relies on promtool to have
// checked the syntax.
func parseQuery(expr string) (query, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return query{}, err
	}
	var q query
	next := func(i int) token {
		if i+1 < len(toks) {
			return toks[i+1]
		}
		return token{}
	}
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		switch {
		case tk.kind == "op" && tk.text == "[":
			for i < len(toks) && toks[i].text != "]" { // range or subquery
				i++
			}
		case tk.kind == "ident" && tk.text == "offset":
			i++ // its duration
			if i < len(toks) && toks[i].text == "-" {
				i++
			}
		case tk.kind == "ident" && groupingWords[tk.text]:
			if next(i).text != "(" {
				continue // group_left without labels
			}
			for i += 2; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == "ident" {
					q.grouping = append(q.grouping, toks[i].text)
				}
			}
		case tk.kind == "ident" && operatorWords[strings.ToLower(tk.text)]:
		case tk.kind == "ident" && next(i).text == "(":
			// a function or an aggregation
		case tk.kind == "ident" && aggregations[tk.text] && groupingWords[next(i).text]:
			// sum by (...) (...)
		case tk.kind == "ident":
			s := selector{metric: tk.text}
			if next(i).text == "{" {
				i += 2
				for i < len(toks) && toks[i].text != "}" {
					if i+2 >= len(toks) || toks[i].kind != "ident" || toks[i+1].kind != "op" || toks[i+2].kind != "string" {
						return query{}, fmt.Errorf("cannot read the matchers of %s", tk.text)
					}
					v := toks[i+2].text
					if uq, err := unquote(v); err == nil {
						v = uq
					}
					s.matchers = append(s.matchers, matcher{toks[i].text, toks[i+1].text, v})
					i += 3
					if i < len(toks) && toks[i].text == "," {
						i++
					}
				}
			}
			q.selectors = append(q.selectors, s)
		case tk.kind == "op" && tk.text == "{":
			return query{}, fmt.Errorf("selector without a metric name")
		}
	}
	return q, nil
}

func unquote(s string) (string, error) {
	if len(s) < 2 {
		return "", errors.New("short string")
	}
	if s[0] == '`' {
		return s[1 : len(s)-1], nil
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}

func TestParseQuery(t *testing.T) {
	q, err := parseQuery(`sum by (a, b) (increase(foo_total{x="1", y=~"p|q"}[5m] offset 1h)) > 0
		and on (c) group_left bar # a comment about baz
		or absent(up{job!="j"}) unless rate(h_bucket[1m:30s]) * 1e3 / time() < inf`)
	if err != nil {
		t.Fatal(err)
	}
	want := query{
		selectors: []selector{
			{"foo_total", []matcher{{"x", "=", "1"}, {"y", "=~", "p|q"}}},
			{"bar", nil},
			{"up", []matcher{{"job", "!=", "j"}}},
			{"h_bucket", nil},
		},
		grouping: []string{"a", "b", "c"},
	}
	if !reflect.DeepEqual(q, want) {
		t.Fatalf("got  %+v\nwant %+v", q, want)
	}
}
