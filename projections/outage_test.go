package projections

import (
	"context"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/testenv"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsserver"
)

// TestNATSOutage stops the NATS server under a running projector and
// starts it again on the same store: the projector reconnects, goes on,
// and the tables match the fold. It also idles longer than a fetch wait,
// which must not be logged as a failure.
func TestNATSOutage(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	startNATS := func() *natsserver.Server { return testenv.StartNATS(t, dir, addr) }
	srv := startNATS()
	js := connectNATS(t, srv.URL())
	db := newDB(t)
	m := newModel(t, js)
	rng := rand.New(rand.NewPCG(13, 14))
	publishMix(m, rng, 40)
	var logs strings.Builder
	p := New(asProjector(t, js), db, WithLogger(newTextLogger(&lockedWriter{w: &logs})), WithBatchSize(10))
	p.cfg.idleWait = 300 * time.Millisecond
	r := start(p)
	if err := r.waitFor(t, m); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // idle: several empty fetches
	if strings.Contains(logs.String(), "WARN") {
		t.Fatalf("idle projector logged warnings:\n%s", logs.String())
	}
	srv.Shutdown()
	time.Sleep(time.Second)
	srv = startNATS()
	defer srv.Shutdown()
	plan, leaves := treePlan(events.ReclaimShareRatio, 3, 3, 4)
	publishRetrying(t, m, func() { m.randomEvents(rng, "tree", plan, leaves, 4, 40) })
	if err := r.waitFor(t, m); err != nil {
		t.Fatalf("%v\n%s", err, logs.String())
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	checkAgainstModel(t, db, m)
	t.Logf("projector log during the outage:\n%s", logs.String())
}

// publishRetrying waits for the client to have reconnected before
// publishing.
func publishRetrying(t *testing.T, m *model, publish func()) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := m.js.AccountInfo(context.Background()); err == nil {
			publish()
			return
		}
	}
	t.Fatal("NATS did not come back")
}
