package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// hub polls the checkpoints while streams are open and sends each stream
// the pools whose projected sequence moved. One poller serves every
// stream, so the database sees one small query per interval however many
// pages are open, and none when no page is.
type hub struct {
	poll     func(context.Context) (map[string]uint64, error)
	interval time.Duration
	log      *slog.Logger

	mu     sync.Mutex
	subs   map[chan LiveEvent]liveFilter
	seqs   map[string]uint64  // last sequences seen
	cancel context.CancelFunc // stops the poller; nil when stopped
	done   chan struct{}
}

func newHub(poll func(context.Context) (map[string]uint64, error), interval time.Duration, log *slog.Logger) *hub {
	return &hub{poll: poll, interval: interval, log: log, subs: map[chan LiveEvent]liveFilter{}}
}

// liveFilter is what one stream receives: one pool ("" every pool),
// of those its token may read. The hub filters before it queues, so the
// pools a token may not read never crowd out those it may (a site has
// thousands, and the first poll names every one).
type liveFilter struct {
	pool    string
	allowed func(pool string) bool
}

func (f liveFilter) wants(pool string) bool {
	return (f.pool == "" || f.pool == pool) && (f.allowed == nil || f.allowed(pool))
}

// subscribe returns a channel of changes for pool ("" every pool) among
// those allowed accepts (nil: all), and a function to stop. The first
// subscriber starts the poller.
func (h *hub) subscribe(pool string, allowed func(pool string) bool) (<-chan LiveEvent, func()) {
	ch := make(chan LiveEvent, 64)
	h.mu.Lock()
	h.subs[ch] = liveFilter{pool: pool, allowed: allowed}
	if h.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel, h.done, h.seqs = cancel, make(chan struct{}), nil
		go h.run(ctx, h.done)
	}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs, ch)
		var done chan struct{}
		if len(h.subs) == 0 && h.cancel != nil {
			h.cancel()
			h.cancel, done = nil, h.done
		}
		h.mu.Unlock()
		if done != nil {
			<-done
		}
	}
}

func (h *hub) run(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		seqs, err := h.poll(qctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			h.log.Warn("console: poll checkpoints", "err", err)
		}
		if err == nil {
			h.publish(seqs)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publish sends the pools whose sequence moved since the last poll (every
// pool on the first poll). A stream that does not keep up loses events:
// each event says "reload", so the next one is as good.
func (h *hub) publish(seqs map[string]uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for pool, seq := range seqs {
		if old, ok := h.seqs[pool]; ok && old == seq {
			continue
		}
		ev := LiveEvent{Pool: pool, Seq: seq}
		for ch, filter := range h.subs {
			if filter.wants(pool) {
				select {
				case ch <- ev:
				default:
				}
			}
		}
	}
	h.seqs = seqs
}

func (c *Console) pollCheckpoints(ctx context.Context) (map[string]uint64, error) {
	if c.cfg.DB == nil {
		return nil, fmt.Errorf("no database")
	}
	return readCheckpoints(ctx, c.cfg.DB)
}

// heartbeat keeps idle streams open through proxies and tells a dead
// client apart.
const heartbeat = 15 * time.Second

// getLive streams server-sent events: "checkpoint" with a LiveEvent each
// time a pool's projection moves (?pool=P for one pool), and a comment
// line as a heartbeat. The page reads it with fetch, so it carries the
// same Authorization header as every other call.
func (c *Console) getLive(w http.ResponseWriter, r *http.Request) {
	pool := r.URL.Query().Get("pool")
	if pool != "" {
		if err := stream.ValidatePool(pool); err != nil {
			writeError(w, http.StatusBadRequest, reasonBadRequest, err)
			return
		}
	}
	if pool != "" && !c.allowed(r, pool) {
		writeError(w, http.StatusForbidden, reasonNotAllowed, fmt.Errorf("this token may not read pool %s", pool))
		return
	}
	if c.db(w) == nil {
		return
	}
	// Middleware (the API's metrics) wraps the ResponseWriter; the
	// ResponseController flushes through its Unwrap.
	if !canFlush(w) {
		writeError(w, http.StatusInternalServerError, reasonUnavailable, fmt.Errorf("streaming is not supported here"))
		return
	}
	flusher := http.NewResponseController(w)
	events, stop := c.live.subscribe(pool, func(pool string) bool { return c.allowed(r, pool) })
	defer stop()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": live\n\n")
	if flusher.Flush() != nil {
		return
	}
	t := time.NewTicker(heartbeat)
	defer t.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.quit:
			return // the server is shutting down
		case ev := <-events: // of a pool this token may read
			b, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(w, "event: checkpoint\ndata: %s\n\n", b); err != nil {
				return
			}
		case <-t.C:
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return
			}
		}
		if flusher.Flush() != nil {
			return
		}
	}
}

// canFlush reports whether w, or a ResponseWriter it wraps (Unwrap, as
// http.ResponseController follows it), can flush.
func canFlush(w http.ResponseWriter) bool {
	for {
		if _, ok := w.(http.Flusher); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		w = u.Unwrap()
	}
}
