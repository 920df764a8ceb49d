package projections

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// asProjector is js's server with the projector's identity: the
// projector of a test runs as it runs in production, while the test
// publishes and inspects as admin.
func asProjector(t testing.TB, js jetstream.JetStream) jetstream.JetStream {
	return testenv.As(t, js, natsauth.Projector)
}

// connectNATS connects to url and makes sure the stream exists.
func connectNATS(t testing.TB, url string) jetstream.JetStream { return testenv.JetStream(t, url) }

// newDB returns a pool on a fresh database migrated by its owner,
// connected as the projector's role: the projector under test has
// exactly the rights it has in production.
func newDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	_, db := newRoleDB(t)
	return db
}

// newRoleDB is newDB with the URLs of the database's other roles.
func newRoleDB(t testing.TB) (testdb.DB, *pgxpool.Pool) {
	t.Helper()
	d := testdb.New(t)
	db := testdb.Pool(t, d.Projector)
	readers.Store(db, testdb.Pool(t, d.Reporting))
	return d, db
}

// readers maps a projector's pool of newDB to a pool on the same
// database as the reporting role.
var readers sync.Map

// reader is the reporting role's pool on db's database: the checks read
// the projection as reporting tools do (db itself for a database not
// made by newDB).
func reader(db *pgxpool.Pool) *pgxpool.Pool {
	if r, ok := readers.Load(db); ok {
		return r.(*pgxpool.Pool)
	}
	return db
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// model publishes events and folds them independently with the engine, by
// the sequences the stream assigned: what the projection must show.
type model struct {
	t       testing.TB
	js      jetstream.JetStream
	clock   time.Time
	n       int
	pools   map[string]*domain.Pool
	last    map[string]uint64
	lastSeq uint64
	refused map[uint64]bool
	ds      []domain.Decision
	asOf    map[string]map[uint64]map[string]int64    // pool -> seq -> consumer -> slots (non-zero)
	ownAsOf map[string]map[uint64][]domain.OwnedSlots // pool -> seq -> the ownership assignment after it
	times   map[uint64]time.Time                      // seq -> event time
}

func newModel(t testing.TB, js jetstream.JetStream) *model {
	return &model{t: t, js: js, clock: scenario.Epoch, pools: map[string]*domain.Pool{}, last: map[string]uint64{},
		refused: map[uint64]bool{}, asOf: map[string]map[uint64]map[string]int64{},
		ownAsOf: map[string]map[uint64][]domain.OwnedSlots{}, times: map[uint64]time.Time{}}
}

func (m *model) pool(name string) *domain.Pool {
	if m.pools[name] == nil {
		m.pools[name] = domain.NewPool(name)
		m.asOf[name] = map[uint64]map[string]int64{}
		m.ownAsOf[name] = map[uint64][]domain.OwnedSlots{}
	}
	return m.pools[name]
}

// publish appends one event and folds it into the model.
func (m *model) publish(pool string, p events.Payload) {
	m.t.Helper()
	env, data := m.next(pool, p)
	at := env.Time
	ack, err := m.js.Publish(context.Background(), stream.Subject(pool, p.EventType()), data, jetstream.WithMsgID(env.ID))
	if err != nil {
		m.t.Fatal(err)
	}
	m.fold(pool, ack.Sequence, at, p)
}

// next is the model's next event for pool, as its envelope and the bytes
// appended: a new id, the model's clock a second on.
func (m *model) next(pool string, p events.Payload) (events.Envelope, []byte) {
	m.t.Helper()
	m.n++
	at := m.clock
	m.clock = m.clock.Add(time.Second)
	env, err := events.New(fmt.Sprintf("ev-%d", m.n), pool, "test", at, p)
	if err != nil {
		m.t.Fatal(err)
	}
	data, err := jsonMarshal(env)
	if err != nil {
		m.t.Fatal(err)
	}
	return env, data
}

func (m *model) fold(pool string, seq uint64, at time.Time, p events.Payload) {
	dp := m.pool(pool)
	ds, err := dp.Apply(domain.Event{Seq: seq, Time: at, Payload: p})
	if err != nil {
		dp.Skip(seq, at)
		m.refused[seq] = true
	}
	m.ds = append(m.ds, ds.Decisions...)
	m.last[pool], m.lastSeq = seq, seq
	held := map[string]int64{}
	for _, c := range dp.Consumers() {
		if c.Allocated != 0 {
			held[c.Path] = c.Allocated
		}
	}
	m.asOf[pool][seq] = held
	m.ownAsOf[pool][seq] = dp.Ownership()
	m.times[seq] = at
}

// publishScenario publishes a scenario file's plan, hosts and steps.
func (m *model) publishScenario(path, pool string) {
	m.t.Helper()
	s, err := scenario.ParseFile(path)
	if err != nil {
		m.t.Fatal(err)
	}
	for _, ev := range s.Events() {
		m.publish(pool, ev.Payload)
	}
}

// treePlan is a plan of fanout[0] top-level consumers, each with
// fanout[1] children, ... ; shares and priorities vary.
func treePlan(reclaim string, fanout ...int) (events.Plan, []string) {
	plan := events.Plan{Policy: events.Policy{Reclaim: reclaim}}
	var leaves []string
	var walk func(prefix string, depth int)
	walk = func(prefix string, depth int) {
		for i := range fanout[depth] {
			path := fmt.Sprintf("%s/c%d", prefix, i)
			share := int64(1 + i%4)
			plan.Consumers = append(plan.Consumers, events.Consumer{Path: path, Share: &share, Priority: int64(i % 3)})
			if depth+1 < len(fanout) {
				walk(path, depth+1)
			} else {
				leaves = append(leaves, path)
			}
		}
	}
	walk("", 0)
	return plan, leaves
}

// randomEvents publishes n events of a realistic mix on pool (which must
// have a plan over leaves and hosts h0..hosts-1): mostly demand changes,
// releases of held slots, a few host failures and recoveries, plan
// changes, and refused events.
func (m *model) randomEvents(rng *rand.Rand, pool string, plan events.Plan, leaves []string, hosts, n int) {
	for range n {
		m.publish(pool, randomEvent(rng, m.pool(pool), plan, leaves, hosts))
	}
}

func randomEvent(rng *rand.Rand, dp *domain.Pool, plan events.Plan, leaves []string, hosts int) events.Payload {
	leaf := leaves[rng.IntN(len(leaves))]
	switch r := rng.IntN(100); {
	case r < 65:
		d := map[string]int64{leaf: rng.Int64N(40)}
		if rng.IntN(3) == 0 {
			d[leaves[rng.IntN(len(leaves))]] = rng.Int64N(40)
		}
		return &events.Demand{Demands: d}
	case r < 85:
		if c, ok := dp.Consumer(leaf); ok && c.Allocated > 0 {
			return &events.Release{Consumer: leaf, Slots: 1 + rng.Int64N(c.Allocated)}
		}
		return &events.Demand{Demands: map[string]int64{leaf: 5}}
	case r < 91:
		h := dp.Hosts()[rng.IntN(hosts)]
		if h.Up {
			return &events.HostDown{Host: h.Name}
		}
		return &events.HostUp{Host: h.Name, Slots: h.Slots}
	case r < 94:
		return &events.PlanChange{Plan: variant(rng, plan)}
	case r < 97:
		return &events.Demand{Demands: map[string]int64{"/no/such/consumer": 1}}
	default:
		return &events.Release{Consumer: leaf, Slots: 1 << 30}
	}
}

// variant is the plan with one random consumer subtree removed (or the
// full plan back).
func variant(rng *rand.Rand, plan events.Plan) events.Plan {
	if rng.IntN(2) == 0 {
		return plan
	}
	drop := plan.Consumers[rng.IntN(len(plan.Consumers))].Path
	out := events.Plan{Policy: plan.Policy}
	for _, c := range plan.Consumers {
		if c.Path != drop && !strings.HasPrefix(c.Path, drop+"/") {
			out.Consumers = append(out.Consumers, c)
		}
	}
	return out
}

func hostsUp(n int, slots int64) []events.Payload {
	var out []events.Payload
	for i := range n {
		out = append(out, &events.HostUp{Host: fmt.Sprintf("h%d", i), Slots: slots})
	}
	return out
}

// running is a projector running in the background.
type running struct {
	p      *Projector
	cancel context.CancelFunc
	done   chan error
}

func start(p *Projector) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	return r
}

// stop ends Run and returns its error.
func (r *running) stop() error {
	r.cancel()
	return <-r.done
}

// waitFor waits until the projector has committed every pool of m up to
// its last event, or Run ended.
func (r *running) waitFor(t testing.TB, m *model) error {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-r.done:
			r.done <- err
			return fmt.Errorf("projector stopped: %v", err)
		default:
		}
		if r.caughtUp(m) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("projector did not catch up within 60s")
	return nil
}

func (r *running) caughtUp(m *model) bool {
	for pool, seq := range m.last {
		if r.p.Applied(pool) < seq {
			return false
		}
	}
	return true
}

// project runs a projector until it has caught up with m, then stops it.
func project(t testing.TB, p *Projector, m *model) {
	t.Helper()
	r := start(p)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
