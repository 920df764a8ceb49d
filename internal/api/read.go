package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections/query"
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
	// One snapshot, so the checkpoint and the rows agree.
	var a query.Allocations
	err := query.ReadOnly(r.Context(), s.db, func(q query.Querier) (err error) {
		a, err = query.PoolAllocations(r.Context(), q, pool)
		return err
	})
	if err != nil {
		s.fail(w, r, dbFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, allocationsResponse(a))
}

func allocationsResponse(a query.Allocations) client.Allocations {
	res := client.Allocations{Pool: a.Pool, Seq: a.Seq,
		Consumers: make([]client.ConsumerState, len(a.Consumers)), HostsAllocations: make([]client.HostAllocation, len(a.Hosts))}
	for i, c := range a.Consumers {
		res.Consumers[i] = client.ConsumerState(c)
	}
	for i, h := range a.Hosts {
		res.HostsAllocations[i] = client.HostAllocation(h)
	}
	return res
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
		s.fail(w, r, dbFailure(err))
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func pageParams(r *http.Request) (from uint64, limit int, aerr *apiError) {
	q := r.URL.Query()
	limit = DefaultDecisionsLimit
	var err error
	if v := q.Get("from_seq"); v != "" {
		if from, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, badRequest(ReasonBadRequest, "from_seq %q: want a sequence number, 0 to %d", v, uint64(math.MaxUint64))
		}
		from = query.ClampSeq(from) // past every stored event: an empty page
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > MaxDecisionsLimit {
			return 0, 0, badRequest(ReasonBadRequest, "limit %q: want 1..%d", v, MaxDecisionsLimit)
		}
	}
	return from, limit, nil
}

// readDecisions reads a page of decisions (query.DecisionsFrom).
func (s *Server) readDecisions(ctx context.Context, pool string, from uint64, limit int) (*client.DecisionsPage, error) {
	page, err := query.DecisionsFrom(ctx, s.db, pool, from, limit)
	if err != nil {
		return nil, err
	}
	res := &client.DecisionsPage{Pool: pool, Decisions: make([]client.Decision, len(page.Decisions)), NextFromSeq: page.NextFromSeq}
	for i, d := range page.Decisions {
		res.Decisions[i] = client.Decision(d)
	}
	return res, nil
}

// readablePool checks the pool name and that there is a database.
func (s *Server) readablePool(r *http.Request) (string, *apiError) {
	pool := r.PathValue("pool")
	if err := stream.ValidatePool(pool); err != nil {
		return "", refusal(err, nil)
	}
	if s.db == nil {
		return "", unavailable(ReasonNoDatabase, "this ledger has no database configured", nil)
	}
	return pool, nil
}

// dbFailure answers a failed read of the projection in the ledger's own
// words; err goes to the log only.
func dbFailure(err error) *apiError {
	if errors.Is(err, context.DeadlineExceeded) {
		return unavailable(ReasonReadTimeout, "reading the projection took too long (PostgreSQL busy or locked): retry", err)
	}
	return unavailable(ReasonDatabaseFailed, "reading the projection failed (PostgreSQL unavailable?): retry; the server's log has the details under the request id", err)
}
