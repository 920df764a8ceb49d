package projections

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// FoldResult is what one event did to its pool.
type FoldResult struct {
	// Decisions made by the engine, in order; none for a refused event.
	Decisions []domain.Decision
	// Refused is why the engine refused the event ("" when it applied).
	// A refused event still takes its offset: the pool skips it.
	Refused string
	// Touched lists the consumers whose view may have changed, in path
	// order; All means every consumer and host may have (plan and host
	// events).
	Touched []string
	All     bool
}

// Fold applies one stored event to its pool (or skips it when the engine
// refuses it) and returns what it did with the next link of the pool's
// hash chain after prev (the zero Hash before the pool's first event).
// The projector and the audit tools fold through this one function, so
// they cannot disagree on what an event did.
//
// ids holds the ids of the events the pool applied (nil: not tracked); an
// event whose id is in it is refused (duplicate_id), and an applied
// event's id is added. An event with st.Gate set is refused with it.
func Fold(p *domain.Pool, ids IDs, st stream.Stored, prev domain.Hash) (FoldResult, domain.Hash) {
	var res FoldResult
	if code, reason := gate(ids, st); code != "" {
		p.Skip(st.Seq, st.Envelope.Time)
		res.Refused = code + ": " + reason
		return res, p.Chain(prev, st.Raw, nil, chainCode(code))
	}
	ds, err := apply(p, st)
	if err != nil {
		p.Skip(st.Seq, st.Envelope.Time)
		res.Refused = err.Error()
	} else {
		res.Decisions = ds
		res.Touched, res.All = p.Touched()
		ids.add(st.Envelope.ID)
	}
	return res, p.Chain(prev, st.Raw, res.Decisions, res.Refused)
}

func apply(p *domain.Pool, st stream.Stored) ([]domain.Decision, error) {
	if st.Envelope.Pool != p.Name() {
		// The subject decides the pool; an envelope that disagrees is
		// not trusted with another pool's state.
		return nil, fmt.Errorf("envelope names pool %q but was stored for pool %q", st.Envelope.Pool, p.Name())
	}
	payload, err := st.Payload()
	if err != nil {
		return nil, err
	}
	return p.Apply(domain.Event{Seq: st.Seq, Time: st.Envelope.Time, Payload: payload})
}

// DecodeMessage turns a stored message into its pool and event. ok is
// false for a subject that names no pool (it can only be skipped). A body
// that is not a valid envelope does not stop the projection: it becomes a
// stand-in envelope (type from the subject, time = when the stream stored
// it, data = the body as a JSON string) that the engine always refuses, so
// it is kept in the events table and in the hash chain.
func DecodeMessage(seq uint64, subject string, stored time.Time, data []byte) (pool string, st stream.Stored, ok bool) {
	pool, err := stream.PoolOf(subject)
	if err != nil {
		return "", stream.Stored{}, false
	}
	st, err = stream.DecodeRaw(seq, data)
	if err == nil {
		return pool, st, true
	}
	typ := subject[strings.LastIndexByte(subject, '.')+1:]
	env := events.Envelope{Type: events.Type(typ), V: events.Version, Pool: pool, Time: stored.UTC(), Data: jsonString(data)}
	return pool, stream.Stored{Seq: seq, Envelope: env, Raw: data}, true
}

// jsonString encodes b as a JSON string PostgreSQL's jsonb accepts (valid
// UTF-8, no NUL).
func jsonString(b []byte) json.RawMessage {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	out, _ := json.Marshal(s)
	return out
}
