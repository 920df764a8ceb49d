package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// Page sizes of /decisions.
const (
	DefaultDecisionsLimit = 1000
	MaxDecisionsLimit     = 10000
)

func (s *Server) getAllocations(w http.ResponseWriter, r *http.Request) {
	pool, aerr := s.readablePool(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	res := AllocationsResponse{Pool: pool, Consumers: []ConsumerState{}, HostsAllocations: []HostAllocation{}}
	// One snapshot, so the checkpoint and the rows agree.
	err := pgx.BeginTxFunc(r.Context(), s.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(tx pgx.Tx) error { return readAllocations(r.Context(), tx, &res) })
	if err != nil {
		writeError(w, dbFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func readAllocations(ctx context.Context, tx pgx.Tx, res *AllocationsResponse) error {
	err := tx.QueryRow(ctx, `SELECT last_seq FROM checkpoints WHERE pool = $1`, res.Pool).Scan(&res.Seq)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("checkpoint: %w", err)
	}
	rows, _ := tx.Query(ctx, `SELECT consumer, leaf, demand, effective, planned, target, allocated, borrowed, waiting_since
		FROM consumer_state WHERE pool = $1 ORDER BY consumer`, res.Pool)
	res.Consumers, err = pgx.AppendRows(res.Consumers, rows, func(row pgx.CollectableRow) (ConsumerState, error) {
		var c ConsumerState
		err := row.Scan(&c.Path, &c.Leaf, &c.Demand, &c.Effective, &c.Planned, &c.Target, &c.Allocated, &c.Borrowed, &c.WaitingSince)
		return c, err
	})
	if err != nil {
		return fmt.Errorf("consumer_state: %w", err)
	}
	rows, _ = tx.Query(ctx, `SELECT consumer, host, slots FROM allocations WHERE pool = $1 ORDER BY consumer, host`, res.Pool)
	res.HostsAllocations, err = pgx.AppendRows(res.HostsAllocations, rows, func(row pgx.CollectableRow) (HostAllocation, error) {
		var a HostAllocation
		err := row.Scan(&a.Consumer, &a.Host, &a.Slots)
		return a, err
	})
	if err != nil {
		return fmt.Errorf("allocations: %w", err)
	}
	return nil
}

func (s *Server) getDecisions(w http.ResponseWriter, r *http.Request) {
	pool, aerr := s.readablePool(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	from, limit, aerr := pageParams(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	res, err := s.readDecisions(r.Context(), pool, from, limit)
	if err != nil {
		writeError(w, dbFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func pageParams(r *http.Request) (from uint64, limit int, aerr *apiError) {
	q := r.URL.Query()
	limit = DefaultDecisionsLimit
	var err error
	if v := q.Get("from_seq"); v != "" {
		if from, err = strconv.ParseUint(v, 10, 64); err != nil || from > 1<<62 {
			return 0, 0, badRequest(ReasonBadRequest, "from_seq %q: want a sequence number", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxDecisionsLimit {
			return 0, 0, badRequest(ReasonBadRequest, "limit %q: want 1..%d", v, MaxDecisionsLimit)
		}
	}
	return from, limit, nil
}

const decisionColumns = `SELECT event_seq, ordinal, kind, consumer, coalesce(from_consumer, ''), host, slots, rule, deadline
	FROM decisions WHERE pool = $1 `

// readDecisions reads up to limit decisions from from_seq on, never
// ending a page inside an event (a client resuming at next_from_seq must
// not see half an event twice); an event with more decisions than limit
// is returned whole.
func (s *Server) readDecisions(ctx context.Context, pool string, from uint64, limit int) (*DecisionsResponse, error) {
	rows, err := s.queryDecisions(ctx, decisionColumns+`AND event_seq >= $2 ORDER BY event_seq, ordinal LIMIT $3`, pool, from, limit+1)
	if err != nil {
		return nil, err
	}
	res := &DecisionsResponse{Pool: pool, Decisions: rows}
	if len(rows) <= limit {
		return res, nil
	}
	cut := rows[limit].EventSeq
	n := limit
	for n > 0 && rows[n-1].EventSeq == cut {
		n--
	}
	res.Decisions = rows[:n]
	if n == 0 {
		if res.Decisions, err = s.queryDecisions(ctx, decisionColumns+`AND event_seq = $2 ORDER BY ordinal`, pool, cut); err != nil {
			return nil, err
		}
		cut++
	}
	res.NextFromSeq = &cut
	return res, nil
}

func (s *Server) queryDecisions(ctx context.Context, sql string, args ...any) ([]DecisionRow, error) {
	rows, _ := s.db.Query(ctx, sql, args...)
	out, err := pgx.AppendRows([]DecisionRow{}, rows, func(row pgx.CollectableRow) (DecisionRow, error) {
		var d DecisionRow
		err := row.Scan(&d.EventSeq, &d.Ordinal, &d.Kind, &d.Consumer, &d.FromConsumer, &d.Host, &d.Slots, &d.Rule, &d.Deadline)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("decisions: %w", err)
	}
	return out, nil
}

// readablePool checks the pool name and that there is a database.
func (s *Server) readablePool(r *http.Request) (string, *apiError) {
	pool := r.PathValue("pool")
	if err := stream.ValidatePool(pool); err != nil {
		return "", refusal(err, nil)
	}
	if s.db == nil {
		return "", unavailable(ReasonNoDatabase, errors.New("this ledger has no database configured"))
	}
	return pool, nil
}

func dbFailure(err error) *apiError {
	if errors.Is(err, context.DeadlineExceeded) {
		return unavailable(ReasonReadTimeout, fmt.Errorf("reading the projection took too long (PostgreSQL busy or locked): retry"))
	}
	return unavailable(ReasonDatabaseFailed, fmt.Errorf("read the projection: %w", err))
}
