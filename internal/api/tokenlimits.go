package api

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/cluster-ledger/ledger/internal/connlimit"
)

// Reasons of the per-token limits (429, with Retry-After).
const (
	ReasonRateLimited     = "rate_limited"      // the token's requests per second
	ReasonTooManyRequests = "too_many_requests" // the token's requests at once
	ReasonTooManyStreams  = "too_many_streams"  // the token's open live streams
)

// TokenLimits bound what one token may take of the server, so that one
// identity (a runaway script, a console left open in many tabs, a leaked
// read token) cannot starve the others: requests per second (a token
// bucket of Burst), requests in progress at once, and open live streams
// (the console's /v1/live, which last as long as a page is open and are
// not counted as requests). Zero leaves a bound off.
type TokenLimits struct {
	Rate       float64 // requests a second, sustained
	Burst      int     // requests at once above the rate
	Concurrent int     // requests in progress
	Streams    int     // open live streams
	// Conns bounds the keep-alive connections one token holds: past it a
	// connection it authenticates is served and then closed, and may be
	// evicted for a newer one, as one without a token is.
	Conns int
}

// DefaultTokenLimits: well above one producer's or one reader's needs
// (an array of up to 1,000 events is one request; the console makes a
// few requests a second), well below what would take a server's
// capacity from every other token.
var DefaultTokenLimits = TokenLimits{Rate: 2000, Burst: 4000, Concurrent: 64, Streams: 8, Conns: 128}

// WithTokenLimits sets the per-token limits (default DefaultTokenLimits).
func WithTokenLimits(l TokenLimits) Option { return func(s *Server) { s.tokenLimits = l } }

// perToken is the state of the limits of every token seen (the tokens
// file is the bound on their number: only authenticated requests get
// here).
type perToken struct {
	limits TokenLimits
	mu     sync.Mutex
	byName map[string]*tokenState
}

type tokenState struct {
	rate             *rate.Limiter // nil: no rate limit
	inFlight, stream atomic.Int64
}

func newPerToken(l TokenLimits) *perToken {
	return &perToken{limits: l, byName: map[string]*tokenState{}}
}

func (p *perToken) state(name string) *tokenState {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.byName[name]
	if st == nil {
		st = &tokenState{}
		if p.limits.Rate > 0 {
			st.rate = rate.NewLimiter(rate.Limit(p.limits.Rate), max(p.limits.Burst, 1))
		}
		p.byName[name] = st
	}
	return st
}

// admit counts a request (or a live stream) of token name against its
// limits; release must be called when it ends. Past a limit the answer
// is 429 with Retry-After: the time the rate allows the next request, or
// a second.
func (p *perToken) admit(name string, stream bool) (release func(), aerr *apiError) {
	st := p.state(name)
	if st.rate != nil {
		now := time.Now()
		r := st.rate.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			return nil, &apiError{status: http.StatusTooManyRequests, reason: ReasonRateLimited, retryAfter: max(d, time.Second),
				msg: "this token sends more requests a second than the ledger allows one token (--token-rate): slow down, or send events in arrays"}
		}
	}
	count, limit, reason, what := &st.inFlight, p.limits.Concurrent, ReasonTooManyRequests, "requests in progress"
	if stream {
		count, limit, reason, what = &st.stream, p.limits.Streams, ReasonTooManyStreams, "live streams open (console pages following a pool)"
	}
	if n := count.Add(1); limit > 0 && n > int64(limit) {
		count.Add(-1)
		return nil, &apiError{status: http.StatusTooManyRequests, reason: reason, retryAfter: time.Second,
			msg: "this token has as many " + what + " as the ledger allows one token: wait for one to end"}
	}
	var once sync.Once
	return func() { once.Do(func() { count.Add(-1) }) }, nil
}

// authenticated is what a request that presented a valid token gets: its
// connection is no longer an unauthenticated one (connlimit), so it may
// stay open between requests (keep-alive), and its answer does not close
// it, unless the token holds TokenLimits.Conns such connections already.
// The middleware noKeepAlive set Connection: close before.
func (s *Server) authenticated(w http.ResponseWriter, r *http.Request, token string) {
	if connlimit.AuthenticatedAs(r.Context(), token, s.tokenLimits.Conns) {
		w.Header().Del("Connection")
	}
}

// noKeepAlive closes, after its answer, the connection of a request that
// has not authenticated (and whose connection never did): a client
// without a token gets no idle keep-alive connection to hold.
func noKeepAlive(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !connlimit.IsAuthenticated(r.Context()) {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
