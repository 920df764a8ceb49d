package test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/cluster-ledger/ledger/internal/testenv"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// TestDevAttacks re-runs, against `ledger dev`, the attacks of issue 9
// that go around the HTTP API: a second dev on the same data directory,
// an anonymous NATS client, and a forged plan published with the admin
// identity straight to the stream.
func TestDevAttacks(t *testing.T) {
	bin := ledgerBinary(t)
	data := testenv.DataDir(t)
	dev := startDev(t, bin, data, freeAddr(t), freeAddr(t))
	defer dev.stop(t)
	base := dev.env["LEDGER_URL"]
	devToken = dev.env["LEDGER_TOKEN"]

	// A second dev on the same data directory is refused at once.
	out, err := exec.Command(bin, "dev", "--data", data, "--http", freeAddr(t), "--nats", freeAddr(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "used by another `ledger dev`") {
		t.Fatalf("second dev on the same --data: %v\n%s", err, out)
	}

	// Anonymous NATS is refused.
	if nc, err := nats.Connect(dev.env["NATS_URL"]); !errors.Is(err, nats.ErrAuthorization) {
		if nc != nil {
			nc.Close()
		}
		t.Fatalf("anonymous NATS connection: %v, want an authorization violation", err)
	}

	for _, ev := range []string{
		`{"id":"p1","type":"plan","data":{"plan":{"consumers":[{"path":"/A"},{"path":"/B"}]}}}`,
		`{"id":"h1","type":"host_up","data":{"host":"h1","slots":10}}`,
		`{"id":"d1","type":"demand","data":{"demands":{"/A":4}}}`,
	} {
		if code, body := post(t, base+"/v1/pools/demo/events", ev); code != 200 {
			t.Fatalf("append: %d %s", code, body)
		}
	}
	before := waitAllocations(t, base, "demo", 3)

	// The forger holds the admin identity (NATS permissions are no
	// defence) and publishes a demand for every slot, and a retry of d1.
	nc, err := natsauth.Connect(dev.env["NATS_URL"], filepath.Join(data, "nats-auth", "admin.nk"))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	forged, _ := json.Marshal(events.Envelope{ID: "evil", Type: events.TypeDemand, V: events.Version, Pool: "demo",
		Time: time.Now().UTC(), Producer: "ledger", Data: json.RawMessage(`{"demands":{"/B":10}}`)})
	if _, err := js.Publish(context.Background(), stream.Subject("demo", events.TypeDemand), forged); err != nil {
		t.Fatal(err)
	}
	after := waitAllocations(t, base, "demo", 4)
	if strip(after) != strip(before) {
		t.Fatalf("a forged event changed the allocations:\nbefore %s\nafter  %s", before, after)
	}
	conn, err := pgx.Connect(context.Background(), dev.env["DATABASE_URL"])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var refused string
	if err := conn.QueryRow(context.Background(), `SELECT refused FROM events WHERE seq = 4`).Scan(&refused); err != nil || refused != "unauthenticated" {
		t.Fatalf("forged event row: refused %q, %v", refused, err)
	}

	// A forged plan that reuses a real id and drops the real consumers
	// locks nobody out: the ledger's own view of the pool refuses it as
	// the projector does, so real producers go on, and a retry of the
	// real id is still a duplicate of the real event.
	forgedPlan, _ := json.Marshal(events.Envelope{ID: "p1", Type: events.TypePlan, V: events.Version, Pool: "demo",
		Time: time.Now().UTC(), Producer: "ledger", Data: json.RawMessage(`{"plan":{"consumers":[{"path":"/M"}]}}`)})
	if _, err := js.Publish(context.Background(), stream.Subject("demo", events.TypePlan), forgedPlan); err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, base+"/v1/pools/demo/events", `{"id":"d2","type":"demand","data":{"demands":{"/A":5}}}`); code != 200 {
		t.Fatalf("a real demand after a forged plan: %d %s", code, body)
	}
	if code, body := post(t, base+"/v1/pools/demo/events", `{"id":"p1","type":"plan","data":{"plan":{"consumers":[{"path":"/A"},{"path":"/B"}]}}}`); code != 200 || !strings.Contains(body, `"duplicate":true`) {
		t.Fatalf("a retry of the real p1 after a forged p1: %d %s", code, body)
	}
	if code, body := post(t, base+"/v1/pools/demo/events", `{"id":"m1","type":"demand","data":{"demands":{"/M":1}}}`); code != 422 {
		t.Fatalf("a demand for the forged plan's consumer: %d %s, want 422", code, body)
	}

	// audit verify names it (exit status 2).
	verify := exec.Command(bin, "audit", "verify")
	verify.Env = dev.environ()
	out, err = verify.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "sequence 4") || !strings.Contains(string(out), `"evil"`) {
		t.Fatalf("audit verify after a forged event: %v\n%s", err, out)
	}
}

// strip drops the sequence and times from an allocations answer.
func strip(body string) string {
	var v map[string]any
	_ = json.Unmarshal([]byte(body), &v)
	delete(v, "seq")
	delete(v, "as_of")
	delete(v, "time")
	b, _ := json.Marshal(v)
	return string(b)
}
