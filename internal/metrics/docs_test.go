package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/cluster-ledger/ledger/internal/metrics"
)

// registeredNames records one of every figure and returns the series
// names the registry exports (a histogram's with _bucket, _sum, _count).
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := metrics.New()
	reg.API().Event("a", "demand", false)
	reg.API().Request("a", 200, "", time.Millisecond)
	reg.API().Request("a", 422, "unknown_consumer", time.Millisecond)
	reg.API().Request("a", 503, "unavailable", time.Millisecond)
	reg.API().HTTP("GET /healthz", 200)
	reg.API().Connections(fakeConns{})
	p := reg.Projector()
	p.Started("p", func() map[string]uint64 { return map[string]uint64{"a": 1} })
	p.Replay("p", 1, 1, 1)
	p.Folded("p", 1, time.Now(), time.Now(), 0)
	p.Committed("p", 1, 1, time.Millisecond, []metrics.PoolFigures{{Pool: "a", Reclaims: 1}})
	fams, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = true
			}
		}
	}
	return names
}

// fakeConns stands for the HTTP server's connection bound.
type fakeConns struct{}

func (fakeConns) MaxConns() int        { return 10 }
func (fakeConns) Open() int            { return 2 }
func (fakeConns) Unauthenticated() int { return 1 }
func (fakeConns) Evicted() int64       { return 0 }

var metricName = regexp.MustCompile(`\bledger_[a-z0-9_]+`)

// checkExpr fails when expr names a ledger metric the code does not
// register (a renamed metric would leave a dashboard or alert blind).
func checkExpr(t *testing.T, where, expr string, names map[string]bool) {
	t.Helper()
	found := metricName.FindAllString(expr, -1)
	if len(found) == 0 {
		t.Errorf("%s: %q names no ledger metric", where, expr)
	}
	for _, n := range found {
		if !names[n] {
			t.Errorf("%s: %q names %s, which the ledger does not register", where, expr, n)
		}
	}
	if strings.Count(expr, "(") != strings.Count(expr, ")") || strings.Count(expr, "{") != strings.Count(expr, "}") {
		t.Errorf("%s: unbalanced brackets in %q", where, expr)
	}
}

// The alerting rules are valid YAML in Prometheus's rule-file shape, and
// each alert's expression names metrics the code registers.
func TestAlertRulesNameRegisteredMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	names := registeredNames(t)
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: want alert, labels.severity and annotations.summary", r)
			}
			if r.For != "" {
				if _, err := time.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", r.Alert, r.For, err)
				}
			}
			checkExpr(t, r.Alert, r.Expr, names)
		}
	}
	for _, want := range []string{"LedgerProjectorLagHigh", "LedgerProjectorLagGrowing", "LedgerPoolHalted", "LedgerAppendErrors", "LedgerProjectorNotCommitting"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("alerts.yml has no %s", want)
		}
	}
}

// The Grafana dashboard is valid JSON, and every panel's queries name
// metrics the code registers.
func TestDashboardNamesRegisteredMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana/ledger.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("ledger.json: %v", err)
	}
	names := registeredNames(t)
	queries := 0
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			checkExpr(t, p.Title, q.Expr, names)
			queries++
		}
	}
	for _, v := range dash.Templating.List {
		checkExpr(t, "variable", v.Definition, names)
	}
	if queries < 10 {
		t.Errorf("%d queries: the dashboard lost its panels", queries)
	}
}
