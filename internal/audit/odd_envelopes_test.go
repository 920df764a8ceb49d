package audit_test

import (
	"context"
	"testing"

	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestVerifyOddEnvelopes: bodies a process holding the ledger's NATS
// identity could store around the API (no data field, data null, an
// empty object, data that jsonb keeps as a string, a type no version
// knows, not JSON at all) are projected as refused events, and audit
// verify, replaying them, finds the projection as the projector wrote it:
// no divergence that is not there (the red team's F1: a body without
// data made verify report one, which also hid later tampering).
func TestVerifyOddEnvelopes(t *testing.T) {
	ctx := context.Background()
	js := testenv.JetStream(t, testenv.NATS(t))
	roles := testdb.New(t)
	last := publishScenario(t, js, "../scenario/testdata/ownership/own-lend-return.yaml", "odd")
	ledger := testenv.As(t, js, natsauth.Ledger)
	for _, m := range []struct{ subject, body string }{
		{"ledger.odd.demand", `{"id":"v1","type":"demand"}`},
		{"ledger.odd.demand", `{"id":"v2","type":"demand","data":null}`},
		{"ledger.odd.demand", `{"id":"v3","type":"demand","v":1,"pool":"odd","data":{}}`},
		{"ledger.odd.demand", `{"id":"v4","type":"demand","v":1,"pool":"odd","data":{"demands":{"/A\u0000":1}}}`},
		{"ledger.odd.drain", `{"id":"v5","type":"drain","v":1,"pool":"odd","data":{}}`},
		{"ledger.odd.demand", `not json`},
		{"ledger.other.x", `{}`},
	} {
		ack, err := ledger.Publish(ctx, m.subject, []byte(m.body))
		if err != nil {
			t.Fatalf("%s: %v", m.body, err)
		}
		last = ack.Sequence
	}
	project(t, js, testdb.Pool(t, roles.Projector), last)
	rep, err := audit.Verify(ctx, testenv.As(t, js, natsauth.Auditor), testdb.Pool(t, roles.Reporting), nil, 1, "", nil)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if rep.UpTo < last {
		t.Fatalf("verified up to %d, want %d", rep.UpTo, last)
	}
}
