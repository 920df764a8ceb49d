package whatif

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/explain"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections/query"
)

// Point is where a pool's state is forked: just after its event at Seq,
// or after its last event at or before Time; the zero Point is now (after
// its last event).
type Point struct {
	Seq  uint64
	Time time.Time
}

// Log reads the log for a fork.
type Log interface {
	// LastSeq is the sequence of the pool's last stored event (0: none).
	LastSeq(ctx context.Context, pool string) (uint64, error)
	// Read calls fn with the pool's stored events from sequence from up to
	// to, in order; an error of fn ends the read and is returned.
	Read(ctx context.Context, pool string, from, to uint64, fn func(audit.Message) error) error
}

// Config is what a fork reads.
type Config struct {
	// DB is the projection, for the pool's snapshots and the ids it
	// applied before them; nil folds the pool from its first event.
	DB *pgxpool.Pool
	// Log is the log.
	Log Log
	// Trusted are the keys whose signatures make a stored event count
	// (as the projector's --trusted-keys); nil counts every event.
	Trusted *signing.Keyring
	// Validate judges a hypothetical event as the ledger would at append
	// (the API adds its own limits to the engine's); nil: the engine's
	// (domain.Pool.Validate) only.
	Validate func(p *domain.Pool, ev events.Payload) error
	// Development folds the rules version in development, as the ledger
	// of ledger dev --rules-development does.
	Development bool
}

// Event is a hypothetical event; Time nil: one second after the event
// before it (the first at the fork point's time).
type Event struct {
	Payload events.Payload
	Time    *time.Time
}

// Fork is a pool's state at a point of its history, to fold hypothetical
// events on.
type Fork struct {
	cfg   Config
	name  string
	rp    *audit.Replayer
	pool  *domain.Pool
	start time.Time // when the first hypothetical event happens by default
}

var errPast = errors.New("past the point")

// New forks pool at the point: the nearest snapshot at or before it, then
// the pool's events after the snapshot up to the point, each through the
// fold of the projector (audit.Replayer, projections.Fold). now is the
// time of a fork of the present (the clock of the ledger answering).
func New(ctx context.Context, cfg Config, pool string, at Point, now time.Time) (*Fork, error) {
	last, err := cfg.Log.LastSeq(ctx, pool)
	if err != nil {
		return nil, err
	}
	to := last
	bound, err := snapshotBound(ctx, cfg.DB, pool, at)
	if err != nil {
		return nil, err
	}
	if at.Seq > 0 {
		to = min(to, at.Seq)
	}
	var ropts []audit.Option
	var popts []domain.PoolOption
	if cfg.Development {
		ropts, popts = []audit.Option{audit.WithDevelopmentRules()}, []domain.PoolOption{domain.WithDevelopmentRules()}
	}
	rp := audit.NewReplayer(cfg.DB, bound+1, ropts...)
	rp.Trust(cfg.Trusted)
	from, err := rp.ReadFrom(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("the snapshot of pool %s: %w", pool, err)
	}
	// stamped is the time of the last event the fork folded that the
	// ledger took (from the snapshot's, if any): the fork's events are
	// stamped no earlier, as the API stamps (decision 530). A refused
	// event's time is whatever its publisher wrote.
	var stamped time.Time
	if p := rp.Pools()[pool]; p != nil {
		stamped = p.Time()
	}
	if from <= to {
		err = cfg.Log.Read(ctx, pool, from, to, func(m audit.Message) error {
			if !at.Time.IsZero() && m.Stored.Envelope.Time.After(at.Time) {
				if ok, err := rp.Stamped(&m); err != nil || ok {
					return cmp.Or(err, errPast)
				}
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			ev, ok, err := rp.Fold(ctx, m)
			if ok && ev.Result.Refused == "" {
				stamped = m.Stored.Envelope.Time
			}
			return err
		})
		if err != nil && !errors.Is(err, errPast) {
			return nil, err
		}
	}
	f := &Fork{cfg: cfg, name: pool, rp: rp, pool: rp.Pools()[pool]}
	if f.pool == nil { // nothing folded: no event, and no snapshot
		f.pool = domain.NewPool(pool, popts...)
	}
	switch {
	case at.Seq > 0:
		f.start = stamped
	case !at.Time.IsZero():
		f.start = at.Time.UTC()
	default:
		f.start = now.UTC().Truncate(time.Microsecond)
	}
	if f.start.Before(stamped) {
		f.start = stamped
	}
	return f, nil
}

// snapshotBound is a sequence the pool's snapshot must not be after: the
// point's own, or for a time the last event the projection stamped a
// microsecond before it or earlier (the column keeps microseconds; the
// log's times are exact, and the replay stops at the first event after
// the time). The newest snapshot for a fork of the present.
func snapshotBound(ctx context.Context, db *pgxpool.Pool, pool string, at Point) (uint64, error) {
	switch {
	case at.Seq > 0:
		return at.Seq, nil
	case at.Time.IsZero():
		return query.MaxSeq - 1, nil
	case db == nil:
		return 0, nil
	}
	seq, err := query.LastSeqAtTime(ctx, db, pool, at.Time.Truncate(time.Microsecond).Add(-time.Microsecond))
	if err != nil {
		return 0, fmt.Errorf("pool %s at %s: %w", pool, at.Time.Format(time.RFC3339Nano), err)
	}
	return seq, nil
}

// Pool is the forked state (before Run; Run changes it).
func (f *Fork) Pool() *domain.Pool { return f.pool }

// Run folds evs on the fork, in memory, and answers with the difference.
// It stops with ctx's error when ctx ends between two events. A Fork runs
// once.
func (f *Fork) Run(ctx context.Context, evs []Event) (*client.WhatIf, error) {
	p := f.pool
	res := &client.WhatIf{Pool: f.name, At: client.WhatIfPoint{Seq: p.Seq(), Time: p.Time()},
		Events: []client.WhatIfOutcome{}, Decisions: []client.WhatIfDecision{}}
	if p.Seq() == 0 {
		res.At.Time = time.Time{}
	}
	if plan, ok := p.Plan(); ok {
		res.Plan = &plan
	}
	before := figures(p.Consumers())
	// The hypothetical events are the asker's, not the log's: no
	// signature to check.
	f.rp.Trust(nil)
	next, seq := f.start, p.Seq()
	for i, ev := range evs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		at := next
		if ev.Time != nil {
			at = ev.Time.UTC()
		}
		out := client.WhatIfOutcome{Index: i, Type: string(ev.Payload.EventType()), Time: at}
		if err := f.check(p, ev.Payload, at); err != nil {
			out.Refused, out.Refusal = client.Code(events.CodeOf(err)), err.Error()
			res.Events = append(res.Events, out)
			next = at.Add(time.Second)
			continue
		}
		seq++
		m, err := message(f.name, seq, at, ev.Payload)
		if err != nil {
			return nil, err
		}
		folded, _, err := f.rp.Fold(ctx, m)
		if err != nil {
			return nil, err
		}
		if r := folded.Result.Result; r.Refused != "" {
			// The gate or the engine refused what Validate let through.
			out.Refused, out.Refusal = client.Code(r.Refused), folded.Result.RefusalDetail
		} else {
			out.Seq = seq
			ds := r.Decisions
			for _, d := range ds {
				res.Decisions = append(res.Decisions, client.WhatIfDecision{Event: i, Decision: wire(d), Text: explain.Describe(p, d, ds)})
			}
		}
		res.Events = append(res.Events, out)
		next = at.Add(time.Second)
	}
	res.Consumers = changes(before, figures(p.Consumers()))
	return res, nil
}

// check judges a hypothetical event as the ledger would at append.
func (f *Fork) check(p *domain.Pool, payload events.Payload, at time.Time) error {
	if at.Before(p.Time()) {
		return fmt.Errorf("%w: time %s is before the pool's previous event (%s)", events.ErrMalformed, at.Format(time.RFC3339Nano), p.Time().Format(time.RFC3339Nano))
	}
	if f.cfg.Validate != nil {
		return f.cfg.Validate(p, payload)
	}
	return p.Validate(payload)
}

// message is a hypothetical event as the log would hold it: an envelope
// with a fresh id (it cannot be taken for a duplicate of a stored one).
func message(pool string, seq uint64, at time.Time, p events.Payload) (audit.Message, error) {
	env, err := events.New(client.NewID(), pool, "what-if", at, domain.StampRules(p))
	if err != nil {
		return audit.Message{}, err
	}
	raw, err := json.Marshal(env)
	if err != nil {
		return audit.Message{}, err
	}
	st, err := stream.DecodeRaw(seq, raw)
	if err != nil {
		return audit.Message{}, err
	}
	return audit.Message{Pool: pool, Stored: st, Subject: stream.Subject(pool, env.Type)}, nil
}

func wire(d domain.Decision) client.Decision {
	return client.Decision{EventSeq: d.Seq, Ordinal: d.Ordinal, Kind: string(d.Kind), Consumer: d.Consumer,
		FromConsumer: d.From, Host: d.Host, Slots: d.Slots, Rule: string(d.Rule), Deadline: d.Deadline}
}

// figures are the consumers' figures by path, with each leaf's unmet
// demand added up its parents.
func figures(cs []domain.ConsumerView) map[string]*client.ConsumerFigures {
	out := make(map[string]*client.ConsumerFigures, len(cs))
	for _, c := range cs {
		out[c.Path] = &client.ConsumerFigures{Parent: c.Parent, Leaf: c.Leaf, Share: c.Share, Priority: c.Priority, Max: c.Max,
			Demand: c.Demand, Effective: c.Effective, Planned: c.Planned, Target: c.Target, Allocated: c.Allocated, Borrowed: c.Borrowed}
	}
	for _, c := range cs {
		if !c.Leaf || c.Demand <= c.Allocated {
			continue
		}
		for path := c.Path; path != "" && path != "/"; {
			f, ok := out[path]
			if !ok {
				break
			}
			f.Unmet += c.Demand - c.Allocated
			path = f.Parent
		}
	}
	return out
}

// changes pairs the figures before and after, in tree order.
func changes(before, after map[string]*client.ConsumerFigures) []client.ConsumerChange {
	paths := make([]string, 0, len(before)+len(after))
	for p := range before {
		paths = append(paths, p)
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.SortFunc(paths, treeOrder)
	out := make([]client.ConsumerChange, len(paths))
	for i, p := range paths {
		b, a := before[p], after[p]
		out[i] = client.ConsumerChange{Path: p, Before: b, After: a, Changed: b == nil || a == nil || *b != *a}
	}
	return out
}

// treeOrder orders paths depth first: a parent before its children, and
// siblings by name ("/a/x" before "/a-b", which plain string order puts
// the other way round).
func treeOrder(a, b string) int {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := strings.Compare(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}
