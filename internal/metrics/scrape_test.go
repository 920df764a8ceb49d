package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/metrics"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/projections"
)

func TestMain(m *testing.M) { testenv.Main(m, contract.InstallDefault) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// stack is a real API and a real projector (embedded NATS, private
// PostgreSQL) sharing one registry, as in `ledger dev`.
type stack struct {
	t                      *testing.T
	natsURL                string
	db                     *pgxpool.Pool // the API's role
	projectorDB            *pgxpool.Pool // the projector's
	ownerDB                *pgxpool.Pool // the tables' owner: to set up a state no service role could
	url                    string
	admin, appender, other string // tokens: every scope; append only; metrics only
}

func newStack(t *testing.T, reg *metrics.Registry) *stack {
	t.Helper()
	roles := testdb.New(t)
	return newStackOn(t, reg, &stack{natsURL: testenv.NATS(t), db: testdb.Pool(t, roles.API), projectorDB: testdb.Pool(t, roles.Projector),
		ownerDB: testdb.Pool(t, roles.Owner)})
}

// newStackOn is another process of the deployment of on (its NATS and
// database, its API's and its projector's roles): its own API and
// tokens, recording in reg.
func newStackOn(t *testing.T, reg *metrics.Registry, on *stack) *stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := &stack{t: t, natsURL: on.natsURL, db: on.db, projectorDB: on.projectorDB, ownerDB: on.ownerDB}
	db := s.db
	var entries []auth.Entry
	for _, tk := range []struct {
		dst    *string
		name   string
		scopes []auth.Scope
	}{{&s.admin, "admin", auth.Scopes}, {&s.appender, "scheduler", []auth.Scope{auth.ScopeAppend, auth.ScopePlan}},
		{&s.other, "prometheus", []auth.Scope{auth.ScopeMetrics}}} {
		token, e, err := auth.Generate(tk.name, tk.scopes, []string{auth.AllPools})
		if err != nil {
			t.Fatal(err)
		}
		*tk.dst, entries = token, append(entries, e)
	}
	tokens, err := auth.New(entries...)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(testenv.Connect(t, s.natsURL, natsauth.Ledger))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(ctx, js, db, api.WithTokens(tokens), api.WithMetrics(reg), api.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	s.url = hs.URL
	return s
}

// runProjector runs a projector recording in rec until the returned
// function is called.
func (s *stack) runProjector(rec *metrics.Projector) (stop func()) {
	js, err := jetstream.New(testenv.Connect(s.t, s.natsURL, natsauth.Projector))
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- projections.New(js, s.projectorDB, projections.WithLogger(quiet), projections.WithMetrics(rec), projections.WithBatchSize(7)).Run(ctx)
	}()
	stop = func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("projector: %v", err)
		}
	}
	s.t.Cleanup(func() {
		if ctx.Err() == nil {
			stop()
		}
	})
	return stop
}

// post appends body to pool with token and returns the status and the
// error reason, if any.
func (s *stack) post(token, pool, body string) (int, string) {
	s.t.Helper()
	rq, _ := http.NewRequest(http.MethodPost, s.url+"/v1/pools/"+pool+"/events", strings.NewReader(body))
	rq.Header.Set("Content-Type", "application/json")
	if token != "" {
		rq.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	var e client.ErrorBody
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(raw, &e); err != nil {
			s.t.Fatalf("%d %s", resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, e.Reason
}

// scrape reads base's /metrics with token and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, base, token string) (int, families) {
	t.Helper()
	rq, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	rq.Header.Set("Accept", "text/plain") // the text format, not protobuf
	if token != "" {
		rq.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(rq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return resp.StatusCode, fams
}

type families map[string]*dto.MetricFamily

// value is the value of the series of family name with exactly labels
// (name=value pairs), and whether there is one. A histogram's value is
// its count.
func (f families) value(name string, labels ...string) (float64, bool) {
	fam := f[name]
	if fam == nil {
		return 0, false
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
next:
	for _, m := range fam.GetMetric() {
		if len(m.GetLabel()) != len(want) {
			continue
		}
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// must is value, failing the test when the series is missing or differs.
func (f families) must(t *testing.T, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := f.value(name, labels...)
	if !ok {
		t.Errorf("%s%v: no such series", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func (s *stack) queryInt(sql string, args ...any) float64 {
	s.t.Helper()
	var n int64
	if err := s.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
	return float64(n)
}

// waitFor scrapes until cond holds on the figures (the projector commits
// in the background), and returns them.
func waitFor(t *testing.T, base, token string, what string, cond func(families) bool) families {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, f := scrape(t, base, token)
		if code == http.StatusOK && cond(f) {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: scrape %d; %v", what, code, f)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const (
	planA = `{"type":"plan","data":{"plan":{"consumers":[{"path":"/lo","share":1,"priority":0},{"path":"/hi","share":1,"priority":10}]}}}`
	planB = `{"type":"plan","data":{"plan":{"consumers":[{"path":"/x","share":1}]}}}`
)

func hostUp(name string, slots int) string {
	return fmt.Sprintf(`{"type":"host_up","data":{"host":%q,"slots":%d}}`, name, slots)
}

func demand(path string, n int) string {
	return fmt.Sprintf(`{"type":"demand","data":{"demands":{%q:%d}}}`, path, n)
}
