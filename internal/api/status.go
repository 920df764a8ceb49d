package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/health"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
)

// StatusTimeout bounds the whole of GET /v1/status: NATS and PostgreSQL
// are asked at the same time, and a part that has not answered by then
// is reported as failing rather than waited for.
const StatusTimeout = 3 * time.Second

// StaleLag is how far behind the stream (the age of its first
// unprojected event) a projector may be before status calls it a
// problem: a projector keeps up within a second or two under load, so a
// minute means it is stopped, stuck or overwhelmed.
const StaleLag = time.Minute

// maxProjectors bounds the projector_offsets rows listed (one per
// partition: a few dozen in any sane deployment).
const maxProjectors = 1024

// getStatus answers GET /v1/status (status.go's StatusResponse). It
// needs the read scope: unlike /healthz it names servers, addresses and
// errors. A token that reads every pool gets the whole report; a token
// limited to some pools gets the pools' view (poolsView).
func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), StatusTimeout)
	defer cancel()
	res := StatusResponse{Time: time.Now().UTC(), Projectors: []ProjectorStatus{}, Halted: []HaltedStatus{}}
	var offsets []query.Offset
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		res.NATS, res.Stream = s.natsStatus(ctx)
	}()
	go func() {
		defer wg.Done()
		res.Postgres, offsets, res.Halted = s.postgresStatus(ctx)
	}()
	wg.Wait()
	res.Projectors = s.projectorStatus(ctx, res.Stream, offsets)
	s.addSetAside(ctx, res.Projectors, offsets)
	s.instances(ctx, res.Projectors)
	res.Appends, res.Reads = "ok", "ok"
	if !res.NATS.Connected || res.Stream == nil {
		res.Appends = "down"
	}
	if !res.Postgres.Reachable || res.Postgres.Error != "" {
		res.Reads = "down"
	}
	res.View = ViewFull
	found := problems(res)
	if !readsEveryPool(r) {
		res = poolsView(r, res)
	}
	for _, p := range found {
		switch {
		case res.View == ViewFull:
			res.Problems = append(res.Problems, p.full)
		case p.pool != "" && readable(r, p.pool) || p.pool == "" && p.pools != "" && !slices.Contains(res.Problems, p.pools):
			res.Problems = append(res.Problems, cmp.Or(p.pools, p.full))
		}
	}
	res.Status = "ok"
	switch {
	case res.Appends == "down" || res.Reads == "down":
		res.Status = "down"
	case len(res.Problems) > 0:
		res.Status = "degraded"
	}
	// 200 whatever the deployment's state: the report was made. The
	// probes (/healthz, /readyz) answer 503 for load balancers (#158).
	writeJSON(w, http.StatusOK, res)
}

// The views of GET /v1/status (StatusResponse.View).
const (
	// ViewFull is the whole report, for a token that reads every pool.
	ViewFull = "full"
	// ViewPools is what concerns a token's own pools (poolsView).
	ViewPools = "pools"
)

// readsEveryPool: the request's token has the read scope on "*".
func readsEveryPool(r *http.Request) bool {
	id, ok := IdentityFrom(r.Context())
	return !ok || id.Allows(auth.ScopeRead, auth.AllPools)
}

// poolsView is the status as a token limited to some pools sees it:
// whether appends and reads work, its halted pools, and the problems
// that bear on its pools in words without figures (problem.pools). The
// stream (its message count, sequences and last store time: every
// pool's traffic), the projectors' offsets and lags (the same), the
// copies and the servers' names and addresses are the operator's, and
// are left out: a token for one pool learns nothing of the others, not
// even how busy they are (docs/decisions.md 252).
func poolsView(r *http.Request, res StatusResponse) StatusResponse {
	out := StatusResponse{View: ViewPools, Appends: res.Appends, Reads: res.Reads, Time: res.Time,
		Projectors: []ProjectorStatus{}, Halted: []HaltedStatus{}, Postgres: res.Postgres,
		NATS: NATSStatus{Connected: res.NATS.Connected, Error: res.NATS.Error}}
	for _, h := range res.Halted {
		if readable(r, h.Pool) {
			out.Halted = append(out.Halted, h)
		}
	}
	return out
}

// natsStatus reports the connection and, when connected, the stream.
func (s *Server) natsStatus(ctx context.Context) (NATSStatus, *StreamStatus) {
	n := NATSStatus{Connected: s.nc.IsConnected()}
	if !n.Connected {
		n.Error = "not connected (" + s.nc.Status().String() + ")"
		if err := s.nc.LastError(); err != nil {
			s.log.Warn("status: NATS", "err", err) // the client's words stay in the log
		}
		return n, nil
	}
	n.Server, n.URL, n.Cluster = s.nc.ConnectedServerName(), s.nc.ConnectedUrlRedacted(), s.nc.ConnectedClusterName()
	st, err := s.streamStatus(ctx)
	if err != nil {
		// Connected, but JetStream did not answer for the stream: most
		// often a stream without a leader (no quorum of its copies).
		s.log.Warn("status: stream info", "err", err)
		n.Error = "stream " + stream.Name + ": " + noAnswer(ctx, "does not answer")
	}
	return n, st
}

// streamStatus asks JetStream for the stream's state and its copies.
func (s *Server) streamStatus(ctx context.Context) (*StreamStatus, error) {
	info, err := s.stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	st := &StreamStatus{
		Name: info.Config.Name, Replicas: max(info.Config.Replicas, 1),
		Messages: info.State.Msgs, FirstSeq: info.State.FirstSeq, LastSeq: info.State.LastSeq,
		LastTime:       info.State.LastTime.UTC(),
		ReplicasDetail: []ReplicaStatus{},
	}
	if c := info.Cluster; c != nil {
		st.Leader, st.Cluster = c.Leader, c.Name
		if c.Leader != "" {
			st.ReplicasDetail = append(st.ReplicasDetail, ReplicaStatus{Name: c.Leader, Leader: true, Current: true})
		}
		// JetStream lists the followers only.
		replicating := false
		for _, p := range c.Replicas {
			st.ReplicasDetail = append(st.ReplicasDetail, ReplicaStatus{
				Name: p.Name, Current: p.Current, Offline: p.Offline, ActiveMS: p.Active.Milliseconds(), Lag: p.Lag,
			})
			replicating = replicating || inFlight(p)
		}
		if replicating {
			s.settleReplicas(ctx, info, st)
		}
	}
	return st, nil
}

// ReplicaSlack and ReplicaSeen bound what status takes for replication
// at work rather than a copy catching up: under appends a follower is
// often an operation or a few behind the leader for milliseconds, which
// NATS reports as not current (decision 496).
const (
	ReplicaSlack = 100
	ReplicaSeen  = 2 * time.Second
)

// replicaSettle is how long status waits to look again at a follower
// NATS reported not current but within ReplicaSlack and ReplicaSeen.
const replicaSettle = 150 * time.Millisecond

// inFlight: p is a follower NATS reports not current, yet near enough
// and heard from recently enough that it may only be replicating.
func inFlight(p *jetstream.PeerInfo) bool {
	return p != nil && !p.Current && !p.Offline && p.Lag <= ReplicaSlack && p.Active <= ReplicaSeen
}

// settleReplicas looks at the stream's copies again after replicaSettle
// and counts as current each follower that either is current then, or
// is still within ReplicaSlack and ReplicaSeen while the stream took new
// messages meanwhile (appends flowing: replication at work). A follower
// still behind a stream that took nothing is catching up, or stuck, and
// stays not current; so does every follower when the second look fails.
func (s *Server) settleReplicas(ctx context.Context, first *jetstream.StreamInfo, st *StreamStatus) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(replicaSettle):
	}
	info, err := s.stream.Info(ctx)
	if err != nil || info.Cluster == nil {
		return
	}
	flowing := info.State.LastSeq != first.State.LastSeq
	for i := range st.ReplicasDetail {
		r := &st.ReplicasDetail[i]
		if r.Leader || r.Current || r.Offline {
			continue
		}
		for _, p := range info.Cluster.Replicas {
			if p.Name == r.Name && (p.Current || (flowing && inFlight(p))) {
				r.Current = true
			}
		}
	}
}

// postgresStatus pings PostgreSQL and reads the projector offsets and
// the halted pools. Its error is in the ledger's words: the driver's
// (which names the server, the user, the database) goes to the log.
func (s *Server) postgresStatus(ctx context.Context) (PostgresStatus, []query.Offset, []HaltedStatus) {
	halted := []HaltedStatus{}
	if s.db == nil {
		return PostgresStatus{Error: "not configured (no DATABASE_URL)"}, nil, halted
	}
	if err := s.db.Ping(ctx); err != nil {
		s.log.Warn("status: PostgreSQL", "err", err)
		return PostgresStatus{Error: pgWords(ctx, err)}, nil, halted
	}
	offsets, err := query.ProjectorOffsets(ctx, s.db, maxProjectors)
	if err != nil {
		s.log.Warn("status: projector offsets", "err", err)
		return PostgresStatus{Reachable: true, Error: noAnswer(ctx, "the projection's tables cannot be read (the ledger's log says why)")}, nil, halted
	}
	rows, err := query.HaltedPools(ctx, s.db, maxHalted)
	if err != nil {
		s.log.Warn("status: halted pools", "err", err)
		return PostgresStatus{Reachable: true, Error: noAnswer(ctx, "the projection's tables cannot be read (the ledger's log says why)")}, offsets, halted
	}
	for _, h := range rows {
		halted = append(halted, HaltedStatus{Pool: h.Pool, Seq: h.Seq, Reason: h.Reason, HaltedAt: h.HaltedAt.UTC()})
	}
	return PostgresStatus{Reachable: true}, offsets, halted
}

// pgWords says why PostgreSQL could not be asked, without the driver's
// text.
func pgWords(ctx context.Context, err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case pgerrcode.TooManyConnections:
			return "refuses connections: too many (the API's role is at its connection limit, or the server at max_connections)"
		case pgerrcode.InvalidPassword, pgerrcode.InvalidAuthorizationSpecification:
			return "refuses the API's credentials"
		case pgerrcode.CannotConnectNow, pgerrcode.AdminShutdown, pgerrcode.CrashShutdown:
			return "is starting up or shutting down"
		}
		return "answers with an error (the ledger's log says which)"
	}
	return noAnswer(ctx, "does not answer (no server accepts connections)")
}

// projectorStatus gives each offset its lag behind the stream (unknown
// when the stream could not be asked). The age of the first unprojected
// event is read once per distinct offset.
func (s *Server) projectorStatus(ctx context.Context, st *StreamStatus, offsets []query.Offset) []ProjectorStatus {
	out := make([]ProjectorStatus, 0, len(offsets))
	ages := map[uint64]*float64{}
	for _, o := range offsets {
		p := ProjectorStatus{Name: o.Name, Partition: o.Partition, Partitions: o.Partitions, Owner: o.Owner,
			Seq: o.Seq, UpdatedAt: o.UpdatedAt.UTC()}
		if st != nil {
			lag := int64(st.LastSeq) - int64(o.Seq)
			p.LagEvents = &lag
			if lag <= 0 {
				zero := 0.0
				p.LagSeconds = &zero
			} else {
				age, ok := ages[o.Seq]
				if !ok {
					age = s.unprojectedAge(ctx, o.Seq)
					ages[o.Seq] = age
				}
				p.LagSeconds = age
			}
		}
		out = append(out, p)
	}
	return out
}

// addSetAside adds to each projector's lag the events it has set aside
// for busy pools (pending_events): below its offset, not folded, so the
// reads of those pools are behind by them (decision 465). A projector
// ahead of the stream, or whose lag is unknown, is left as it is.
func (s *Server) addSetAside(ctx context.Context, ps []ProjectorStatus, offsets []query.Offset) {
	if s.db == nil || len(offsets) == 0 {
		return
	}
	aside, err := query.SetAsidePools(ctx, s.db, maxSetAsidePools)
	if err != nil {
		s.log.Warn("status: events set aside", "err", err)
		return
	}
	for i := range ps {
		p := &ps[i]
		if p.LagEvents == nil || *p.LagEvents < 0 || p.LagSeconds == nil {
			continue
		}
		for _, a := range aside {
			if !offsets[i].Covers(a.Pool, projections.PartitionOf) {
				continue
			}
			events, age := *p.LagEvents+int64(a.Events), max(time.Since(a.Oldest).Seconds(), 0)
			p.LagEvents = &events
			if age > *p.LagSeconds {
				p.LagSeconds = &age
			}
		}
	}
}

// maxSetAsidePools bounds the pools with events set aside that status
// reads (the set-aside events are bounded in memory, 64 MiB).
const maxSetAsidePools = 10000

// unprojectedAge is how long ago the first message after seq was stored
// (nil when it cannot be read in time).
func (s *Server) unprojectedAge(ctx context.Context, seq uint64) *float64 {
	age, err := health.FirstUnprojectedAge(ctx, s.stream, seq)
	if err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			s.log.Warn("status: first unprojected message", "after", seq, "err", err)
		}
		return nil
	}
	return &age
}

// instances asks NATS, for every projector row at once, whether it has a
// live instance (health.ProjectorInstance); left unknown when NATS
// cannot be asked.
func (s *Server) instances(ctx context.Context, ps []ProjectorStatus) {
	if !s.nc.IsConnected() {
		return
	}
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() {
			in, err := health.ProjectorInstance(ctx, s.js, ps[i].Name, projections.DefaultPinnedTTL)
			if err != nil {
				s.log.Warn("status: projector consumer", "name", ps[i].Name, "err", err)
				return
			}
			live, pulling := in.Live, in.Pulling
			ps[i].Live, ps[i].Instances, ps[i].NotLive = &live, &pulling, in.Why
		})
	}
	wg.Wait()
}

// noAnswer is words, or that the status deadline passed (a hung server,
// a stream without a quorum).
func noAnswer(ctx context.Context, words string) string {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %v", StatusTimeout)
	}
	return words
}

// problem is one thing that makes the deployment less than ok: full is
// the operator's words; pools, the words for a token limited to some
// pools ("" when it does not bear on their appends and reads, such as
// one copy of three offline), without names or figures of the shared
// parts; pool, the pool it is about (only its readers are told).
type problem struct {
	full, pools, pool string
}

// same is a problem told alike to every token.
func same(words string) problem { return problem{full: words, pools: words} }

// problems lists, in words, what makes the deployment less than ok.
func problems(res StatusResponse) []problem {
	var out []problem
	if !res.NATS.Connected {
		out = append(out, same("NATS: "+res.NATS.Error))
	} else if res.Stream == nil {
		out = append(out, same(res.NATS.Error+" (a replicated stream answers only while a quorum of its copies is up)"))
	}
	if st := res.Stream; st != nil {
		if st.Leader == "" {
			out = append(out, problem{full: fmt.Sprintf("stream %s has no leader: appends wait for an election (a quorum of its %d copies must be up)", st.Name, st.Replicas),
				pools: "the stream has no leader: appends wait for an election"})
		}
		for _, r := range st.ReplicasDetail {
			switch {
			case r.Offline:
				out = append(out, problem{full: fmt.Sprintf("stream copy on %s is offline", r.Name)})
			case !r.Current:
				out = append(out, problem{full: fmt.Sprintf("stream copy on %s is catching up (%d operations behind)", r.Name, r.Lag)})
			}
		}
		if n := len(st.ReplicasDetail); n > 0 && n < st.Replicas {
			out = append(out, problem{full: fmt.Sprintf("stream %s has %d of its %d copies", st.Name, n, st.Replicas)})
		}
	}
	if res.Appends == "down" {
		out = append(out, same("appends are down: producers get 503 until NATS and the stream answer again (nothing is lost: they retry)"))
	}
	if res.Reads == "down" {
		appends := "appends go on (the log keeps them; the projectors fold them once it is back)"
		if res.Appends == "down" {
			appends = "appends are down too"
		}
		out = append(out, same("PostgreSQL "+res.Postgres.Error+": reads (allocations, decisions, the console) and the projection are down, and the projectors' state is unknown; "+appends))
	}
	out = append(out, lagProblems(res.Projectors)...)
	for _, h := range res.Halted {
		words := fmt.Sprintf("pool %s halted at sequence %d (fix the cause and restart the projector)", h.Pool, h.Seq)
		out = append(out, problem{full: words, pools: words, pool: h.Pool})
	}
	return out
}

// lagProblems flags projectors ahead of the stream or stale: the first
// event a projector (or partition) has not projected is older than
// StaleLag. Every partition consumer reads the whole stream and its
// offset moves past other partitions' events, so an idle partition is
// not behind and is not flagged.
// A token for some pools is told, once and without the projector's
// name or figures, that new events may not show in its reads.
func lagProblems(ps []ProjectorStatus) []problem {
	var out []problem
	for _, p := range ps {
		switch {
		case p.Live != nil && !*p.Live:
			out = append(out, problem{full: fmt.Sprintf("projector %s has no live instance: %s", p.Name, p.NotLive),
				pools: "a projector has no live instance: new events are not projected, reads do not show them"})
		}
		switch {
		case p.LagEvents != nil && *p.LagEvents < 0:
			out = append(out, problem{full: fmt.Sprintf("projector %s is %d events ahead of the stream: the stream lost its tail; the projector appends those events again (`ledger recover --help`)", p.Name, -*p.LagEvents),
				pools: "the stream lost its newest events; the projector appends them again (appends wait meanwhile)"})
		case p.LagSeconds != nil && *p.LagSeconds > StaleLag.Seconds():
			out = append(out, problem{full: fmt.Sprintf("projector %s is %.0fs behind the stream (%d events)", p.Name, *p.LagSeconds, *p.LagEvents),
				pools: fmt.Sprintf("the projection is more than %v behind the stream: reads may not show the newest events", StaleLag)})
		}
	}
	return out
}
