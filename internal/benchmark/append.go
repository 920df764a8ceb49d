package benchmark

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/api"
	"github.com/cluster-ledger/ledger/internal/auth"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// startAPI runs the ledger's HTTP API (api.Serve, as `ledger serve` does)
// on a free port, on the NATS server and database given, until stopAPI:
// signing every event and trusting the run's key as deployed, unless
// unsigned.
func (b *bench) startAPI(ctx context.Context, natsURL, dbURL string, unsigned bool) error {
	token, e, err := auth.Generate("bench", auth.Scopes, []string{auth.AllPools})
	if err != nil {
		return err
	}
	tokens, err := auth.New(e)
	if err != nil {
		return err
	}
	b.apiToken = token
	// The per-token rate is off: the phases measure what the append path
	// carries with one token, not the limiter.
	opts := []api.Option{api.WithTokens(tokens), api.WithTokenLimits(api.TokenLimits{Concurrent: api.DefaultTokenLimits.Concurrent})}
	if b.signer != nil && !unsigned {
		opts = append(opts, api.WithSigner(b.signer), api.WithTrustedKeys(b.keys))
	}
	actx, cancel := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- api.Serve(actx, api.ServeConfig{HTTPAddr: "127.0.0.1:0", NATSURL: natsURL, NATSCreds: b.creds(natsURL), DatabaseURL: dbURL,
			// Error level: stopping the API logs its NATS disconnection as a warning.
			Logger:  slog.New(slog.NewTextHandler(b.cfg.Progress, &slog.HandlerOptions{Level: slog.LevelError})),
			Ready:   func(addr string) { ready <- addr },
			Options: opts})
	}()
	select {
	case addr := <-ready:
		b.apiURL = "http://" + addr
	case err := <-done:
		cancel()
		return fmt.Errorf("API: %w", err)
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
	b.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64}}
	b.stopAPI = func() error {
		b.stopAPI = nil
		cancel()
		b.http.CloseIdleConnections()
		return <-done
	}
	return nil
}

// post sends one request body to the pool's events endpoint and returns
// where the events went.
func (b *bench) post(ctx context.Context, pool string, body []byte) ([]client.Appended, error) {
	rq, err := http.NewRequestWithContext(ctx, http.MethodPost, b.apiURL+"/v1/pools/"+pool+"/events", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Authorization", "Bearer "+b.apiToken)
	resp, err := b.http.Do(rq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST pool %s: %s: %s", pool, resp.Status, bytes.TrimSpace(raw))
	}
	var er client.AppendResponse
	if err := json.Unmarshal(raw, &er); err != nil {
		return nil, fmt.Errorf("POST pool %s: %w", pool, err)
	}
	return er.Events, nil
}

// postSetup creates a pool through the API: its plan and hosts, one array.
func (b *bench) postSetup(ctx context.Context, pool string) error {
	ps := setup()
	ids := make([]string, len(ps))
	for i := range ps {
		ids[i] = fmt.Sprintf("%s-%s-setup-%d", b.runID, pool, i)
	}
	body, err := requestBody(ids, ps, true)
	if err != nil {
		return err
	}
	_, err = b.post(ctx, pool, body)
	return err
}

// publishSetup creates a pool by publishing its plan and hosts straight
// to the stream.
func (b *bench) publishSetup(ctx context.Context, js jetstream.JetStream, pool string) error {
	g := newGenerator(0)
	var msgs []*nats.Msg
	for i, p := range setup() {
		m, err := envelopeMsg(pool, fmt.Sprintf("%s-%s-setup-%d", b.runID, pool, i), g.at, p)
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	b.signAll(msgs)
	return publishAsync(ctx, js, msgs)
}

// clientLoad is what one client sends: per request, the events' ids and
// payloads; the API bodies and the raw messages are built from them.
type clientLoad struct {
	apiPool, rawPool string
	ids              [][]string
	payloads         [][]events.Payload
}

func (b *bench) makeLoad(kind string, seed uint64, client, requests, perRequest int) clientLoad {
	l := clientLoad{
		apiPool: fmt.Sprintf("api-%s%d-%s", kind, client, b.runID),
		rawPool: fmt.Sprintf("raw-%s%d-%s", kind, client, b.runID),
	}
	g := newGenerator(seed + uint64(client))
	for r := range requests {
		ids := make([]string, perRequest)
		ps := make([]events.Payload, perRequest)
		for k := range perRequest {
			ids[k] = fmt.Sprintf("%s-%d-%d", l.apiPool, r, k)
			ps[k] = g.next()
		}
		l.ids, l.payloads = append(l.ids, ids), append(l.payloads, ps)
	}
	return l
}

// bodies are the load's API request bodies.
func (l clientLoad) bodies(array bool) ([][]byte, error) {
	out := make([][]byte, len(l.ids))
	for r := range l.ids {
		var err error
		if out[r], err = requestBody(l.ids[r], l.payloads[r], array); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// messages are the same events as envelopes of pool, with their ids
// (prefixed) as message ids.
func (l clientLoad) messages(pool, prefix string) ([][]*nats.Msg, error) {
	at := time.Now().UTC().Truncate(time.Microsecond)
	out := make([][]*nats.Msg, len(l.ids))
	for r := range l.ids {
		for k, p := range l.payloads[r] {
			m, err := envelopeMsg(pool, prefix+l.ids[r][k], at, p)
			if err != nil {
				return nil, err
			}
			out[r] = append(out[r], m)
		}
	}
	return out, nil
}

// concurrently runs f for every client at once and returns how long it
// took for all of them to finish, and the first error.
func concurrently(clients int, f func(c int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, clients)
	start := make(chan struct{})
	for c := range clients {
		wg.Go(func() {
			<-start
			errs[c] = f(c)
		})
	}
	t := time.Now()
	close(start)
	wg.Wait()
	return time.Since(t), errors.Join(errs...)
}

// appendTarget is a NATS server the append phase measures, with the
// database its API checks the projection in.
type appendTarget struct {
	label          string // the server's sync policy, as the table prints it
	natsURL, dbURL string
	nc             *nats.Conn
	js             jetstream.JetStream
}

// appendFigures are one target's rates, in events/s, with their details;
// the unsigned API's beside the signed one's on the first target.
type appendFigures struct {
	apiSingle, apiArray, rawSync, rawAsync, rawAtomic float64
	apiSingleUnsigned, apiArrayUnsigned               float64
	// rawAtomicSigning is the raw atomic batches with each batch signed
	// just before it is published (the first target of a signed run).
	rawAtomicSigning float64
	details          [8]string
}

// appends is phase 1: events/s through the API, one event per request and
// arrays, beside raw JetStream publishes of the same envelopes; each on a
// server that syncs every write (the safe default) and on one that syncs
// in the background (nats-server's default), in the same run, so the
// table shows what the sync policy costs. The projector does not run
// during this phase (in production it is another process, possibly on
// another machine), so API and raw publishes share the machine on the
// same terms.
func (b *bench) appends(ctx context.Context) error {
	targets := b.appendTargets
	// Two rounds, the second in the opposite order, each figure the
	// better of its two: a shared machine's load drifts, and a round
	// measured while something else ran should not decide the comparison.
	figs := make([]appendFigures, len(targets))
	for round := range appendRounds {
		for k := range targets {
			i := k
			if round%2 == 1 {
				i = len(targets) - 1 - k
			}
			t := targets[i]
			b.progress("appends on the server with %s (round %d of %d)", t.label, round+1, appendRounds)
			// The unsigned API beside the signed one, under the default
			// policy only.
			f, err := b.measureAppends(ctx, t, fmt.Sprintf("r%d", round), i == 0 && b.signer != nil)
			if err != nil {
				return fmt.Errorf("%s: %w", t.label, err)
			}
			figs[i] = figs[i].best(f)
		}
	}
	names := [5]string{"API, one event per POST", fmt.Sprintf("API, arrays of %d per POST", b.n.arrayLen), "raw js.PublishMsg, sync, msg id",
		fmt.Sprintf("raw PublishAsync, batches of %d", b.n.arrayLen), fmt.Sprintf("raw atomic batch publish of %d", b.n.arrayLen)}
	for k, name := range names {
		for i, t := range targets { // beside each other: the same measure under each policy
			f := figs[i]
			v := [5]float64{f.apiSingle, f.apiArray, f.rawSync, f.rawAsync, f.rawAtomic}[k]
			r := Result{Phase: "1 append", Name: name + " [" + t.label + "]", Value: v, Unit: "events/s",
				Detail: fmt.Sprintf("%s (the better of %d rounds)", f.details[k], appendRounds)}
			switch k {
			case 0: // the API's own overhead on the raw publish it makes
				r.Signing, r.Baseline, r.BaselineValue = b.signing(), "raw sync publish", f.rawSync
			case 1: // arrays are atomic batches (docs/decisions.md #34)
				r.Signing, r.Baseline, r.BaselineValue = b.signing(), "raw atomic batch", f.rawAtomic
			}
			if i == 0 && k == 0 {
				r.Target, r.Min = "≥ 0.65", 0.65
			}
			if i == 0 && k == 1 {
				r.Target, r.Min = "≥ 0.7", 0.7
			}
			b.add(r)
			if i == 0 && k < 2 && f.apiSingleUnsigned > 0 {
				u := r
				u.Signing, u.Target, u.Met, u.Ratio = "unsigned", "", nil, 0
				u.Value = [2]float64{f.apiSingleUnsigned, f.apiArrayUnsigned}[k]
				u.Detail = fmt.Sprintf("%s (the better of %d rounds)", f.details[5+k], appendRounds)
				b.add(u)
			}
		}
	}
	if f := figs[0]; f.rawAtomicSigning > 0 {
		// The atomic batch baseline publishes envelopes signed before the
		// clock starts; the API must sign what it publishes, as any
		// producer of signed envelopes must. Beside the target's figure,
		// for reading it: the same batches, each signed just before it is
		// published (over the cores, as the API signs).
		label := " [" + targets[0].label + "]"
		b.add(Result{Phase: "1 append", Name: fmt.Sprintf("raw atomic batch publish of %d, each signed just before", b.n.arrayLen) + label,
			Value: f.rawAtomicSigning, Unit: "events/s", Detail: fmt.Sprintf("%s (the better of %d rounds)", f.details[7], appendRounds)})
		b.add(Result{Phase: "1 append", Name: "API, arrays beside raw batches that sign" + label, Signing: b.signing(), Value: f.apiArray, Unit: "events/s",
			Baseline: "raw atomic batch, signing", BaselineValue: f.rawAtomicSigning,
			Detail: "for reading the target's ratio: its baseline publishes envelopes signed beforehand"})
	}
	if len(targets) == 3 {
		safe, fast, r3 := figs[0], figs[1], figs[2]
		b.add(Result{Phase: "1 append", Name: "API single: sync always / unsynced", Value: safe.apiSingle / fast.apiSingle, Unit: "ratio",
			Detail: "what syncing every acknowledged write costs a producer sending one event at a time"})
		b.add(Result{Phase: "1 append", Name: "API arrays: sync always / unsynced", Value: safe.apiArray / fast.apiArray, Unit: "ratio"})
		b.add(Result{Phase: "1 append", Name: "API single: R3 / R1 sync always", Value: r3.apiSingle / safe.apiSingle, Unit: "ratio",
			Detail: "the quorum of three servers in place of a synced disk, one event at a time"})
		b.add(Result{Phase: "1 append", Name: "API arrays: R3 / R1 sync always", Value: r3.apiArray / safe.apiArray, Unit: "ratio"})
		b.add(Result{Phase: "1 append", Name: "raw sync publish: R3 / R1 sync always", Value: r3.rawSync / safe.rawSync, Unit: "ratio",
			Detail: "the same comparison without the API: what replication itself costs"})
	}
	b.add(Result{Phase: "1 append", Name: "API arrays / raw async", Value: figs[0].apiArray / figs[0].rawAsync, Unit: "ratio",
		Detail: "plain async publishing: no atomicity, no per-pool check (" + targets[0].label + ")"})
	return nil
}

// appendRounds is how many times phase 1 measures each server.
const appendRounds = 2

// best keeps, measure by measure, the higher rate of f and g.
func (f appendFigures) best(g appendFigures) appendFigures {
	out := f
	for k, pair := range [8][2]*float64{{&out.apiSingle, &g.apiSingle}, {&out.apiArray, &g.apiArray}, {&out.rawSync, &g.rawSync},
		{&out.rawAsync, &g.rawAsync}, {&out.rawAtomic, &g.rawAtomic}, {&out.apiSingleUnsigned, &g.apiSingleUnsigned},
		{&out.apiArrayUnsigned, &g.apiArrayUnsigned}, {&out.rawAtomicSigning, &g.rawAtomicSigning}} {
		if *pair[1] > *pair[0] {
			*pair[0], out.details[k] = *pair[1], g.details[k]
		}
	}
	return out
}

// measureAppends runs the append measures against one target, on pools
// named after round (each round appends new events): the API as deployed
// (signed unless the run is unsigned), the API unsigned when
// withUnsigned, then the raw publishes of the same envelopes (signed
// beforehand, so the same bytes as the API's).
func (b *bench) measureAppends(ctx context.Context, t appendTarget, round string, withUnsigned bool) (appendFigures, error) {
	var f appendFigures
	var err error
	if f.apiSingle, f.apiArray, f.details[0], f.details[1], err = b.measureAPI(ctx, t, round, false); err != nil {
		return f, err
	}
	if withUnsigned {
		if f.apiSingleUnsigned, f.apiArrayUnsigned, f.details[5], f.details[6], err = b.measureAPI(ctx, t, round+"u", true); err != nil {
			return f, err
		}
	}
	clients, perSingle, perArray := b.n.clients, max(1, b.n.singles/b.n.clients), max(1, b.n.arrays/b.n.clients)
	singles := make([]clientLoad, clients)
	arrays := make([]clientLoad, clients)
	for c := range clients {
		singles[c] = b.makeLoad("s"+round, 100, c, perSingle, 1)
		arrays[c] = b.makeLoad("a"+round, 200, c, perArray, b.n.arrayLen)
		for _, pool := range []string{singles[c].rawPool, arrays[c].rawPool, atomicPool(arrays[c])} {
			if err := b.publishSetup(ctx, t.js, pool); err != nil {
				return f, err
			}
		}
	}
	signing := withUnsigned // the first target of a signed run
	if signing {
		for c := range clients {
			if err := b.publishSetup(ctx, t.js, signingPool(arrays[c])); err != nil {
				return f, err
			}
		}
	}
	singleMsgs, arrayMsgs, atomicMsgs := make([][][]*nats.Msg, clients), make([][][]*nats.Msg, clients), make([][][]*nats.Msg, clients)
	signingMsgs := make([][][]*nats.Msg, clients)
	for c := range clients {
		var err error
		if singleMsgs[c], err = singles[c].messages(singles[c].rawPool, "raw-"); err != nil {
			return f, err
		}
		if arrayMsgs[c], err = arrays[c].messages(arrays[c].rawPool, "raw-"); err != nil {
			return f, err
		}
		if atomicMsgs[c], err = arrays[c].messages(atomicPool(arrays[c]), "atomic-"); err != nil {
			return f, err
		}
		if signing {
			if signingMsgs[c], err = arrays[c].messages(signingPool(arrays[c]), "signing-"); err != nil {
				return f, err
			}
		}
		for _, mss := range [][][]*nats.Msg{singleMsgs[c], arrayMsgs[c], atomicMsgs[c]} {
			for _, ms := range mss {
				b.signAll(ms)
			}
		}
	}
	nSingle, nArray := float64(perSingle*clients), float64(perArray*clients*b.n.arrayLen)

	b.progress("raw JetStream: %d synchronous publishes", perSingle*clients)
	ctx = step(ctx, "raw sync")
	d, err := concurrently(clients, func(c int) error {
		for _, ms := range singleMsgs[c] {
			for _, m := range ms {
				if _, err := t.js.PublishMsg(ctx, m, jetstream.WithMsgID(m.Header.Get(jetstream.MsgIDHeader))); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	f.rawSync, f.details[2] = nSingle/d.Seconds(), fmt.Sprintf("the same %.0f envelopes, %d publishers, one at a time each, %.2fs", nSingle, clients, d.Seconds())

	b.progress("raw JetStream: %d async batches of %d", perArray*clients, b.n.arrayLen)
	d, err = concurrently(clients, func(c int) error {
		for _, ms := range arrayMsgs[c] {
			if err := publishAsync(ctx, t.js, ms); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return f, err
	}
	f.rawAsync, f.details[3] = nArray/d.Seconds(), fmt.Sprintf("the same %.0f envelopes, %d publishers, waiting for each batch's acks, %.2fs", nArray, clients, d.Seconds())

	b.progress("raw JetStream: %d atomic batches of %d (the API's protocol)", perArray*clients, b.n.arrayLen)
	ctx = step(ctx, "raw atomic")
	d, err = b.publishAtomics(ctx, t.nc, atomicMsgs, func(c int) string { return atomicPool(arrays[c]) }, false)
	if err != nil {
		return f, err
	}
	f.rawAtomic, f.details[4] = nArray/d.Seconds(), fmt.Sprintf("the same %.0f envelopes, Nats-Batch-* headers + commit request (what the API sends, without its checks), %d publishers, %.2fs", nArray, clients, d.Seconds())
	if !signing {
		return f, nil
	}
	b.progress("raw JetStream: %d atomic batches of %d, each signed just before", perArray*clients, b.n.arrayLen)
	ctx = step(ctx, "raw atomic signing")
	d, err = b.publishAtomics(ctx, t.nc, signingMsgs, func(c int) string { return signingPool(arrays[c]) }, true)
	if err != nil {
		return f, err
	}
	f.rawAtomicSigning, f.details[7] = nArray/d.Seconds(), fmt.Sprintf("the same %.0f envelopes, each batch signed (Signer.SignAll, over the cores) then published as above, %d publishers, %.2fs", nArray, clients, d.Seconds())
	return f, nil
}

// measureAPI measures the API on target t, signed as the run is or
// unsigned: single events, then arrays, each client on a pool of its own.
func (b *bench) measureAPI(ctx context.Context, t appendTarget, round string, unsigned bool) (single, array float64, singleDetail, arrayDetail string, err error) {
	if err := b.startAPI(ctx, t.natsURL, t.dbURL, unsigned); err != nil {
		return 0, 0, "", "", err
	}
	defer func() {
		if b.stopAPI != nil {
			_ = b.stopAPI()
		}
	}()
	clients, perSingle, perArray := b.n.clients, max(1, b.n.singles/b.n.clients), max(1, b.n.arrays/b.n.clients)
	singles := make([]clientLoad, clients)
	arrays := make([]clientLoad, clients)
	how := "signed"
	if unsigned || b.signer == nil {
		how = "unsigned"
	}
	b.progress("preparing %d single events and %d arrays of %d for %d clients (API %s)", perSingle*clients, perArray*clients, b.n.arrayLen, clients, how)
	singleBodies, arrayBodies := make([][][]byte, clients), make([][][]byte, clients)
	for c := range clients {
		singles[c] = b.makeLoad("s"+round, 100, c, perSingle, 1)
		arrays[c] = b.makeLoad("a"+round, 200, c, perArray, b.n.arrayLen)
		for _, l := range []clientLoad{singles[c], arrays[c]} {
			if err := b.postSetup(ctx, l.apiPool); err != nil {
				return 0, 0, "", "", err
			}
		}
		if singleBodies[c], err = singles[c].bodies(false); err != nil {
			return 0, 0, "", "", err
		}
		if arrayBodies[c], err = arrays[c].bodies(true); err != nil {
			return 0, 0, "", "", err
		}
	}
	nSingle, nArray := float64(perSingle*clients), float64(perArray*clients*b.n.arrayLen)
	who := fmt.Sprintf("%d clients, each on its own pool", clients)

	b.progress("API (%s): %d single events, one POST each", how, perSingle*clients)
	ctx = step(ctx, "api single "+how)
	d, err := concurrently(clients, func(c int) error {
		for _, body := range singleBodies[c] {
			if _, err := b.post(ctx, singles[c].apiPool, body); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, "", "", err
	}
	single, singleDetail = nSingle/d.Seconds(), fmt.Sprintf("%.0f events, %s, %.2fs", nSingle, who, d.Seconds())

	b.progress("API (%s): %d arrays of %d events", how, perArray*clients, b.n.arrayLen)
	ctx = step(ctx, "api arrays "+how)
	d, err = concurrently(clients, func(c int) error {
		for _, body := range arrayBodies[c] {
			if _, err := b.post(ctx, arrays[c].apiPool, body); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, "", "", err
	}
	array, arrayDetail = nArray/d.Seconds(), fmt.Sprintf("%d arrays, %s, %.2fs", perArray*clients, who, d.Seconds())
	return single, array, singleDetail, arrayDetail, nil
}

// atomicPool is the pool of the atomic-batch baseline of an array load.
func atomicPool(l clientLoad) string { return "atomic-" + l.apiPool }

// signingPool is the pool of the atomic batches signed as they go.
func signingPool(l clientLoad) string { return "signing-" + l.apiPool }

// publishAtomics publishes each publisher's batches (msgs[c], one
// publisher each) as atomic batches with ids of pool(c), each signed just
// before it is sent when sign is set, and returns how long it took.
func (b *bench) publishAtomics(ctx context.Context, nc *nats.Conn, msgs [][][]*nats.Msg, pool func(c int) string, sign bool) (time.Duration, error) {
	return concurrently(len(msgs), func(c int) error {
		for r, ms := range msgs[c] {
			if sign {
				b.signAll(ms)
			}
			if err := publishAtomic(ctx, nc, fmt.Sprintf("%s-%d", pool(c), r), ms); err != nil {
				return err
			}
		}
		return nil
	})
}

// publishAtomic publishes msgs as one JetStream atomic batch, as the API
// does for an array (internal/api/batch.go): every message but the last
// without waiting, the last with the commit header as a request, one round
// trip. Unlike the API it sends no expected-last-sequence check.
func publishAtomic(ctx context.Context, nc *nats.Conn, batchID string, msgs []*nats.Msg) error {
	for k, m := range msgs {
		m.Header.Set(jetstream.ExpectedStreamHeader, stream.Name)
		m.Header.Set("Nats-Batch-Id", batchID)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(k+1))
		if k < len(msgs)-1 {
			if err := nc.PublishMsg(m); err != nil {
				return err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return err
		}
		var ack struct {
			Count int                 `json:"count"`
			Error *jetstream.APIError `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &ack); err != nil {
			return fmt.Errorf("batch commit: %q: %w", resp.Data, err)
		}
		if ack.Error != nil {
			return fmt.Errorf("batch commit: %w", ack.Error)
		}
		if ack.Count != len(msgs) {
			return fmt.Errorf("batch commit: answer %q does not acknowledge %d messages", resp.Data, len(msgs))
		}
	}
	return nil
}
