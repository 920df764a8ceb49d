package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/internal/auth"
)

// Reasons of the access checks.
const (
	ReasonUnauthenticated   = "unauthenticated"    // 401: no token, or not a known one
	ReasonMissingScope      = "missing_scope"      // 403: the token lacks the scope
	ReasonPoolNotAllowed    = "pool_not_allowed"   // 403: the token does not cover the pool
	ReasonOriginNotAllowed  = "origin_not_allowed" // 403: a browser page from an origin not allowed
	ReasonProducerMismatch  = "producer_mismatch"  // 403: the event claims another producer than the token's
	ReasonUnsupportedMedia  = "unsupported_media_type"
	ReasonIDConflict        = "id_conflict"  // 409: an id reused with other content
	ReasonReadTimeout       = "read_timeout" // 503: a read took longer than the statement timeout
	ReasonStreamUnavailable = "stream_unavailable"
)

// WithTokens sets who may use the API: a fixed set (*auth.Tokens) or a
// watched tokens file (*auth.File, reloaded while the server runs, so a
// token added, revoked or rotated takes effect without a restart).
// Without it every request but /healthz is answered 401: the API is
// never open by default.
func WithTokens(t auth.Authenticator) Option { return func(s *Server) { s.tokens = t } }

// WithAllowedOrigins lists the browser origins (scheme://host[:port])
// whose pages may call the API. A request carrying any other Origin
// header is refused, so a web page open in a local browser cannot write
// to or read from the ledger. None by default.
func WithAllowedOrigins(origins ...string) Option {
	return func(s *Server) { s.origins = append(s.origins, origins...) }
}

type identityKey struct{}

// IdentityFrom returns the identity Authorize found for the request.
func IdentityFrom(ctx context.Context) (*auth.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*auth.Identity)
	return id, ok
}

// Authorize wraps h so that it runs only for a request from an allowed
// origin (or none), with a valid bearer token holding scope on the
// route's {pool} (any pool when the route names none). Others get 403
// (origin, scope, pool) or 401 (token). h finds the identity with
// IdentityFrom. Other handlers on the same server (a web console) wrap
// themselves with it, usually with auth.ScopeRead.
func (s *Server) Authorize(scope auth.Scope, h http.Handler) http.Handler {
	return s.authorize(scope, false, h)
}

// AuthorizeStream is Authorize for a long-lived answer (the console's
// live stream): counted against the token's streams, not its requests
// in progress (TokenLimits).
func (s *Server) AuthorizeStream(scope auth.Scope, h http.Handler) http.Handler {
	return s.authorize(scope, true, h)
}

func (s *Server) authorize(scope auth.Scope, stream bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, aerr := s.authenticate(r)
		if aerr == nil {
			s.authenticated(w, r, id.Name)
			aerr = allow(id, scope, r.PathValue("pool"))
		}
		var release func()
		if aerr == nil {
			release, aerr = s.perToken.admit(id.Name, stream)
		}
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		defer release()
		ctx := context.WithValue(r.Context(), identityKey{}, id)
		if stream {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
			go s.recheckStream(ctx, cancel, r, id)
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// StreamRecheck is how often the token of an open live stream is checked
// again: a stream whose token was revoked, rotated or given other scopes
// or pools (the tokens file is reloaded within about a second,
// auth.File) ends within about two seconds of the change. A stream held
// open would otherwise go on showing the pools' progress to someone no
// longer allowed to see it, for as long as the connection lasts
// (docs/decisions.md 190).
const StreamRecheck = time.Second

// recheckStream cancels a live stream's context (the stream ends) once
// its request's token no longer authenticates as id.
func (s *Server) recheckStream(ctx context.Context, cancel context.CancelFunc, r *http.Request, id *auth.Identity) {
	t := time.NewTicker(StreamRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if now, ok := s.identityOf(r); !ok || !now.Same(id) {
			s.log.Info("live stream closed: its token was revoked or its rights changed", "token", id.Name)
			cancel()
			return
		}
	}
}

// HandleRead mounts h on the API's server at pattern (a http.ServeMux
// pattern such as "GET /console/{pool}"), behind the read scope.
func (s *Server) HandleRead(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.Authorize(auth.ScopeRead, h))
}

// authenticate checks the origin, then the bearer token.
func (s *Server) authenticate(r *http.Request) (*auth.Identity, *apiError) {
	if aerr := s.checkOrigin(r); aerr != nil {
		return nil, aerr
	}
	if _, ok := bearer(r); !ok {
		return nil, &apiError{status: http.StatusUnauthorized, reason: ReasonUnauthenticated,
			msg: "no bearer token: send Authorization: Bearer <token> (LEDGER_TOKEN)"}
	}
	id, ok := s.identityOf(r)
	if !ok {
		return nil, &apiError{status: http.StatusUnauthorized, reason: ReasonUnauthenticated, msg: "unknown token"}
	}
	noteToken(r.Context(), id.Name)
	return id, nil
}

// bearer is the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	token = strings.TrimSpace(token)
	return token, ok && token != ""
}

// identityOf is the identity the request's bearer token has in the
// token set in force now.
func (s *Server) identityOf(r *http.Request) (*auth.Identity, bool) {
	token, ok := bearer(r)
	if !ok || s.tokens == nil {
		return nil, false
	}
	id, ok := s.tokens.Authenticate(token)
	return id, ok && id != nil
}

func allow(id *auth.Identity, scope auth.Scope, pool string) *apiError {
	if !id.Has(scope) {
		return &apiError{status: http.StatusForbidden, reason: ReasonMissingScope,
			msg: fmt.Sprintf("token %s lacks the %s scope", id.Name, scope)}
	}
	if !id.Allows(scope, pool) {
		return &apiError{status: http.StatusForbidden, reason: ReasonPoolNotAllowed,
			msg: fmt.Sprintf("token %s may not %s pool %s", id.Name, scope, pool)}
	}
	return nil
}

// checkOrigin refuses a request whose Origin header is present and not
// allowed. Browsers send Origin on cross-site requests (and on every
// POST), so this stops a web page from using the API through the
// browser of someone who can reach it; programs send none. The server's
// own origin may read (the console's module script and data are
// same-origin requests that carry Origin): it is this server's page, and
// its reads need a token anyway. A what-if is a read sent as a POST (its
// body is the hypothetical events), so the console's page may send it
// too; it appends nothing.
func (s *Server) checkOrigin(r *http.Request) *apiError {
	o := r.Header.Get("Origin")
	if o == "" || s.originAllowed(o) || (sameOrigin(r, o) && (r.Method == http.MethodGet || r.Method == http.MethodHead || isWhatIf(r))) {
		return nil
	}
	return &apiError{status: http.StatusForbidden, reason: ReasonOriginNotAllowed,
		msg: fmt.Sprintf("origin %q is not allowed (--allow-origin)", o)}
}

func (s *Server) originAllowed(o string) bool { return slices.Contains(s.origins, o) }

// sameOrigin reports whether origin is the one the request was sent to.
func sameOrigin(r *http.Request, origin string) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return r.Host != "" && strings.EqualFold(origin, scheme+r.Host)
}

// cors answers allowed origins' preflight requests and marks the answers
// to them readable by their pages.
func (s *Server) cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := r.Header.Get("Origin")
		if o != "" && s.originAllowed(o) {
			w.Header().Set("Access-Control-Allow-Origin", o)
			w.Header().Add("Vary", "Origin")
			if r.Method == http.MethodOptions {
				w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
				w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
				w.Header().Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if aerr := s.checkOrigin(r); aerr != nil {
			writeError(w, aerr)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// noFraming forbids every page of another site to show any answer of
// this server in a frame (the console's pages above all: a framing page
// could dress them up or trick clicks): CSP frame-ancestors 'none' for
// browsers that know it, X-Frame-Options DENY for older ones. Set on
// every answer, errors and JSON included, so no route is forgotten.
func noFraming(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", FrameAncestorsNone)
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

// FrameAncestorsNone is the Content-Security-Policy of every answer but
// the console's pages, whose own policy (internal/console) includes it.
const FrameAncestorsNone = "frame-ancestors 'none'"

// requireJSON refuses a body that is not declared application/json: a
// browser can send text/plain across origins without asking first.
func requireJSON(r *http.Request) *apiError {
	ct := r.Header.Get("Content-Type")
	mt, _, _ := strings.Cut(ct, ";")
	if !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return &apiError{status: http.StatusUnsupportedMediaType, reason: ReasonUnsupportedMedia,
			msg: fmt.Sprintf("Content-Type %q: send application/json", ct)}
	}
	return nil
}
