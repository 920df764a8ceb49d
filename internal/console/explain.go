package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/explain"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections/query"
)

// storyLength is how many of the consumer's decisions the story keeps.
const storyLength = 20

var errFound = errors.New("found")

// getExplain re-folds the pool's log from its nearest snapshot before the
// decision's event up to that event, as `ledger explain --at` does, and
// tells the decision and its consumer's story in words. The re-fold takes
// one of the fork slots (Config.Slot; 503 busy when none is free): 64
// explains of a large pool at once, one token's requests in progress,
// held the two cores for seconds (decision 397).
func (c *Console) getExplain(w http.ResponseWriter, r *http.Request) {
	pool, ok := pathPool(w, r)
	if !ok {
		return
	}
	seq, err1 := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	ord64, err2 := strconv.ParseUint(r.PathValue("ordinal"), 10, 64)
	if err1 != nil || err2 != nil || seq < 1 {
		writeError(w, http.StatusBadRequest, reasonBadRequest, fmt.Errorf("decision %s/%s: want a sequence (1 to %d) and an ordinal (0 to %d)",
			r.PathValue("seq"), r.PathValue("ordinal"), uint64(math.MaxUint64), uint64(math.MaxUint64)))
		return
	}
	if seq > query.MaxSeq || ord64 > query.MaxOrdinal {
		// Valid numbers, past anything the projection can hold.
		writeError(w, http.StatusNotFound, reasonNotFound, fmt.Errorf("pool %s has no decision %d.%d", pool, seq, ord64))
		return
	}
	ord := int(ord64)
	db := c.db(w)
	if db == nil {
		return
	}
	if c.cfg.JS == nil {
		writeError(w, http.StatusServiceUnavailable, reasonUnavailable, errors.New("explain re-folds the log, and this console has no NATS connection"))
		return
	}
	d, found, err := query.DecisionAt(r.Context(), db, pool, seq, ord)
	if err != nil {
		c.dbFailure(w, r, err)
		return
	}
	if !found {
		writeError(w, http.StatusNotFound, reasonNotFound, fmt.Errorf("pool %s has no decision %d.%d", pool, seq, ord))
		return
	}
	consumer := d.Consumer
	if c.cfg.Slot != nil {
		release, err := c.cfg.Slot(r.Context(), pool)
		if err != nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, reasonBusy, err)
			return
		}
		defer release()
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	res, err := c.explain(ctx, pool, seq, ord, consumer)
	if err != nil {
		c.failed(w, r, reasonUnavailable, fmt.Sprintf("could not re-fold pool %s's log to explain decision %d.%d: retry; the server's log has the details under the request id", pool, seq, ord), err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (c *Console) explain(ctx context.Context, pool string, seq uint64, ord int, consumer string) (*ExplainResponse, error) {
	rp := audit.NewReplayer(c.cfg.DB, seq, c.cfg.Replay...)
	from, err := rp.ReadFrom(ctx, pool)
	if err != nil {
		return nil, err
	}
	story := explain.New(consumer, storyLength)
	res := &ExplainResponse{Pool: pool, EventSeq: seq, Ordinal: ord}
	var told bytes.Buffer
	err = audit.ReadLog(ctx, c.cfg.JS, from, stream.PoolFilter(pool), func(m audit.Message) error {
		if m.Stored.Seq > seq {
			return fmt.Errorf("event %d of pool %s is not in the log", seq, pool)
		}
		ev, ok, err := rp.Fold(ctx, m)
		if err != nil || !ok {
			return err
		}
		ds := ev.Result.Decisions
		story.After(ev.Pool, m.Stored.Seq, m.Stored.Envelope.Time, ds)
		if m.Stored.Seq < seq {
			return nil
		}
		for _, d := range ds {
			if d.Ordinal == ord {
				res.Decision = explain.Describe(ev.Pool, d, ds)
			}
		}
		if res.Decision == "" {
			return fmt.Errorf("re-folding event %d of pool %s made no decision %d: the log and the projection disagree (run ledger audit verify)", seq, pool, ord)
		}
		if err := story.Write(&told, ev.Pool); err != nil {
			return err
		}
		return errFound
	})
	if errors.Is(err, errFound) {
		res.Story = told.String()
		return res, nil
	}
	if err == nil {
		err = fmt.Errorf("event %d of pool %s is not in the log", seq, pool)
	}
	return nil, err
}
