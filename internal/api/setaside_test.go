package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/internal/testdb"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestStatusCountsSetAsideEvents: a busy pool's events that the
// projector has set aside (pending_events, decision 184) are below its
// committed offset but not folded: reads of that pool are behind by
// them. GET /v1/status said the projector was 0 events and 0 s behind,
// and /readyz "current", while such events waited for minutes (seen
// under ledger dev: 709 events of a pool at the limits set aside for
// over four minutes, status ok, readyz current). The lag now counts
// them: their number in lag_events and the age of the oldest in
// lag_seconds, in the status and in readiness (decision 465). The
// projector's commit is staged as its role writes it: the busy pool's
// event set aside, the quiet pool's after it folded, the offset past
// both.
func TestStatusCountsSetAsideEvents(t *testing.T) {
	natsURL := testenv.NATS(t)
	l, db, _ := statusLedgerWith(t, natsURL, testdb.New(t), []api.Option{api.WithReadyLag(time.Second)})
	setup(l, "busy")
	setup(l, "quiet")
	project(t, natsURL, db, 4)

	busy := l.mustPost("busy", demand(map[string]int{"/a": 3})).Events[0].Seq
	quiet := l.mustPost("quiet", demand(map[string]int{"/b": 2})).Events[0].Seq
	ctx := context.Background()
	st, err := l.js.Stream(ctx, stream.Name)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetMsg(ctx, busy)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, `INSERT INTO pending_events (pool, seq, subject, headers, body, stored_at) VALUES ('busy', $1, $2, NULL, $3, $4)`,
		int64(busy), msg.Subject, msg.Data, msg.Time)
	exec(t, db, `UPDATE projector_offsets SET stream_seq = $1`, int64(quiet))
	time.Sleep(1500 * time.Millisecond)

	res, _ := status(t, l)
	if len(res.Projectors) != 1 {
		t.Fatalf("projectors: %+v", res.Projectors)
	}
	p := res.Projectors[0]
	if p.Seq != quiet || p.LagEvents == nil || *p.LagEvents != 1 || p.LagSeconds == nil || *p.LagSeconds < 1.4 || *p.LagSeconds > 30 {
		t.Errorf("one event set aside for 1.5 s: projector %+v (lag_events %v, lag_seconds %v), want 1 event, 1.5 s", p, deref(p.LagEvents), deref(p.LagSeconds))
	}
	resp, raw := send(t, http.MethodGet, l.url+"/readyz", "", "", nil)
	var r api.ReadyResponse
	mustUnmarshal(t, raw, &r)
	if resp.StatusCode != http.StatusServiceUnavailable || r.Projection != "behind" || r.LagSeconds == nil || *r.LagSeconds < 1.4 {
		t.Errorf("one event set aside for 1.5 s, bound 1 s: /readyz %d %s", resp.StatusCode, raw)
	}

	// Folded: the lag is gone.
	exec(t, db, `DELETE FROM pending_events`)
	pastProbeCache()
	res, _ = status(t, l)
	if p := res.Projectors[0]; p.LagEvents == nil || *p.LagEvents != 0 || p.LagSeconds == nil || *p.LagSeconds != 0 {
		t.Errorf("nothing set aside, offset at the stream's end: projector %+v", p)
	}
	if resp, raw := send(t, http.MethodGet, l.url+"/readyz", "", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("nothing set aside: /readyz %d %s", resp.StatusCode, raw)
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
