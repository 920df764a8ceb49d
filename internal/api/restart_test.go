package api_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/natsserver"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

func startNATS(t *testing.T, dir, listen string) *natsserver.Server {
	t.Helper()
	return testenv.StartNATS(t, dir, listen)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func health(t *testing.T, l *ledger) (int, api.HealthResponse) {
	resp, err := http.Get(l.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h api.HealthResponse
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h
}

// While NATS is down appends answer 503 with Retry-After; once it is back
// (same store, same port) they succeed, and nothing acknowledged is lost.
func TestNATSRestart(t *testing.T) {
	dir := t.TempDir()
	srv := startNATS(t, dir, "127.0.0.1:-1")
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger(t, srv.URL())
	setup(l, "p")
	ids := map[string]uint64{}
	for _, id := range []string{"before-1", "before-2"} {
		ids[id] = l.mustPost("p", withID(demand(map[string]int{"/a": len(ids) + 1}), id)).Events[0].Seq
	}

	srv.Shutdown()
	waitFor(t, "the client to notice", func() bool { return !l.nc.IsConnected() })
	code, _, bad := l.post("p", withID(demand(map[string]int{"/b": 1}), "during"))
	if code != http.StatusServiceUnavailable || bad.Reason != "unavailable" {
		t.Errorf("append while NATS is down: %d %+v, want 503 unavailable", code, bad)
	}
	if code, h := health(t, l); code != http.StatusServiceUnavailable || h.NATS == "ok" {
		t.Errorf("healthz while NATS is down: %d %+v", code, h)
	}

	startNATS(t, dir, net.JoinHostPort("127.0.0.1", u.Port()))
	waitFor(t, "the client to reconnect", l.nc.IsConnected)
	// The producer retries the refused request, same id, until accepted.
	waitFor(t, "the append to succeed", func() bool {
		code, res, _ := l.post("p", withID(demand(map[string]int{"/b": 1}), "during"))
		if code == http.StatusOK {
			ids["during"] = res.Events[0].Seq
		}
		return code == http.StatusOK
	})
	ids["after"] = l.mustPost("p", withID(release("/a", 1), "after")).Events[0].Seq
	pastProbeCache()
	if code, h := health(t, l); code != http.StatusOK || h.NATS != "ok" {
		t.Errorf("healthz after the restart: %d %+v", code, h)
	}

	stored := poolEvents(t, l.js, "p")
	if len(stored) != 2+len(ids) {
		t.Errorf("%d events stored, want %d", len(stored), 2+len(ids))
	}
	for _, e := range stored {
		if seq, ok := ids[e.stored.Envelope.ID]; ok && seq != e.seq {
			t.Errorf("%s acknowledged at %d, stored at %d", e.stored.Envelope.ID, seq, e.seq)
		}
		delete(ids, e.stored.Envelope.ID)
	}
	if len(ids) != 0 {
		t.Errorf("acknowledged but not stored: %v", ids)
	}
}
