package benchmark

import (
	"context"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5/pgxpool"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-io/nats.go"

	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"

	"github.com/cluster-ledger/ledger/projections/query"
)

// replay is phase 4: a large log of one 1,000-leaf pool is read raw from
// JetStream, re-folded in memory by the audit replayer, and rebuilt into
// an empty database by the rebuild code path. Each of the three covers
// the whole stream (the earlier phases' events too).
func (b *bench) replay(ctx context.Context) error {
	pool := "replay-" + b.runID
	b.progress("writing %d events of pool %s to the stream", b.n.replay, pool)
	st, err := b.writeLog(ctx, pool, 2, b.n.replay)
	if err != nil {
		return err
	}
	b.add(Result{Phase: "4 replay", Name: fmt.Sprintf("write the log: PublishAsync, batches of %d", b.n.publishBatch),
		Value: float64(st.events) / st.publish.Seconds(), Unit: "events/s",
		Detail: fmt.Sprintf("%d events in %.1fs (generating them: %.1fs more, not counted)", st.events, st.publish.Seconds(), st.gen.Seconds())})
	last, err := b.lastSeq(ctx)
	if err != nil {
		return err
	}

	b.progress("(a) raw read of sequences 1..%d", last)
	ctx = step(ctx, "raw read")
	start := time.Now()
	n, err := b.rawRead(ctx, last)
	if err != nil {
		return fmt.Errorf("raw read: %w", err)
	}
	d := time.Since(start)
	raw := float64(n) / d.Seconds()
	b.add(Result{Phase: "4 replay", Name: "(a) raw JetStream read", Value: raw, Unit: "events/s",
		Detail: fmt.Sprintf("%d messages, ordered consumer, fetches of 2000, metadata only, %.2fs", n, d.Seconds())})

	ctx = step(ctx, "raw direct read")
	start = time.Now()
	cpu := processCPU()
	direct := 0
	if err := stream.Read(ctx, b.js.Conn(), "ledger.>", 1, last, func(stream.Msg) error { direct++; return nil }); err != nil {
		return fmt.Errorf("raw direct read: %w", err)
	}
	d = time.Since(start)
	rawDirect := float64(direct) / d.Seconds()
	b.add(Result{Phase: "4 replay", Name: "(a2) raw JetStream direct-get read (stream.Read, what readers use)", Value: rawDirect, Unit: "events/s",
		Detail: fmt.Sprintf("%d messages, batches of 1024, no consumer, %.2fs%s", direct, d.Seconds(), cpuUse(processCPU()-cpu, d, direct))})

	// Signed first (as deployed), then unsigned, each beside the raw
	// direct-get read; the signed replay's target is what the cores can
	// verify: their number times one core's rate, 0.8 of it.
	perCore := b.verifyRate()
	if b.signer != nil {
		b.add(Result{Phase: "4 replay", Name: "Ed25519 verify, one core", Signing: "signed", Value: perCore, Unit: "events/s",
			Detail: "keys.Verify of the log's own messages, one goroutine: the per-core limit of every signed reader"})
	}
	for _, keys := range []*signing.Keyring{b.keys, nil} {
		if keys == nil && b.signer != nil {
			b.progress("(b) replay again, unsigned")
		} else {
			b.progress("(b) replay (read + fold, no writes) of sequences 1..%d, %s", last, b.signing())
		}
		ctx := step(ctx, "replay "+map[bool]string{true: "signed", false: "unsigned"}[keys != nil])
		start = time.Now()
		cpu := processCPU()
		r := audit.NewReplayer(nil, 1)
		r.Trust(keys)
		folded, decisions, refused := 0, 0, 0
		err = audit.ReadLogTrusted(ctx, b.js, 1, "ledger.>", keys, func(m audit.Message) error {
			ev, ok, err := r.Fold(ctx, m)
			if ok {
				folded++
				decisions += len(ev.Result.Decisions)
				if ev.Result.Refused == projections.CodeUnauthenticated {
					refused++
				}
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		if refused > 0 {
			return fmt.Errorf("replay: %d events refused as unauthenticated: the harness's log is not signed by the key it trusts", refused)
		}
		d = time.Since(start)
		used := processCPU() - cpu
		replay := float64(folded) / d.Seconds()
		res := Result{Phase: "4 replay", Name: "(b) replay: read + fold (audit.Replayer)", Value: replay, Unit: "events/s",
			Baseline: "raw direct-get read", BaselineValue: rawDirect,
			Detail: fmt.Sprintf("%d events of %d pools → %d decisions, in memory, %.2fs%s", folded, len(r.Pools()), decisions, d.Seconds(), cpuUse(used, d, folded))}
		if keys != nil {
			limit := float64(b.report.CPUs) * perCore * 0.8
			res.Signing, res.Baseline, res.BaselineValue = "signed", "cores × verify per core", float64(b.report.CPUs)*perCore
			res.Target, res.Min = "≥ 0.8", 0.8
			res.Detail += fmt.Sprintf("; %.2f of the raw read; the target is %.0f events/s", replay/rawDirect, limit)
		} else {
			res.Signing, res.Target, res.Min = "unsigned", "≥ 0.8", 0.8
		}
		b.add(res)
		if keys == nil {
			break
		}
	}

	into, err := b.createDatabase(ctx, "bench_"+b.runID+"_rebuild")
	if err != nil {
		return err
	}
	if err := migrations.Up(ctx, into); err != nil {
		return err
	}
	b.progress("(c) rebuild of sequences 1..%d into an empty database", last)
	ctx = step(ctx, "rebuild")
	start = time.Now()
	first := b.watchOffset(ctx, into, b.projectLast)
	if err := b.cfg.Rebuild(ctx, b.natsURL, into, b.keysFile); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	d = time.Since(start)
	rebuild := float64(last) / d.Seconds()
	b.add(Result{Phase: "4 replay", Name: "(c) rebuild into an empty database", Signing: b.signing(), Value: rebuild, Unit: "events/s",
		Detail: fmt.Sprintf("%d events, the `ledger replay --into` code path, %.1fs", last, d.Seconds())})
	if early, ok := <-first; ok && b.projectLast > 0 {
		rate := float64(b.projectLast) / early.Seconds()
		b.add(Result{Phase: "4 replay", Name: "rebuild of phase 2's log", Signing: b.signing(), Value: rate, Unit: "events/s",
			Baseline: "projector of phase 2", BaselineValue: b.projectRate, Target: "≈ 1 (≥ 0.8)", Min: 0.8,
			Detail: fmt.Sprintf("the same %d events", b.projectLast)})
	}
	return nil
}

// verifyRate is how many of the log's signatures one core verifies a
// second (0 for an unsigned run).
func (b *bench) verifyRate() float64 {
	if b.signer == nil || b.perCore > 0 {
		return b.perCore
	}
	g := newGenerator(9)
	msgs := make([]*nats.Msg, 0, 2000)
	for i := range cap(msgs) {
		m, err := envelopeMsg("verify-"+b.runID, fmt.Sprintf("v-%d", i), g.at, g.next())
		if err != nil {
			panic(err)
		}
		msgs = append(msgs, m)
	}
	b.signAll(msgs)
	start := time.Now()
	for _, m := range msgs {
		if err := b.keys.Verify(stream.Published(m.Subject), m.Header, m.Data); err != nil {
			panic(fmt.Sprintf("benchmark: own signature refused: %v", err))
		}
	}
	b.perCore = float64(len(msgs)) / time.Since(start).Seconds()
	return b.perCore
}

// watchOffset reports, once, how long after its start the projection in
// database url committed sequence seq (closed unanswered if it never does
// within the run).
func (b *bench) watchOffset(ctx context.Context, url string, seq uint64) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		defer close(out)
		db, err := pgxpool.New(ctx, url)
		if err != nil {
			return
		}
		defer db.Close()
		for ctx.Err() == nil {
			if at, err := query.ProjectorOffset(ctx, db, ""); err == nil && at >= seq {
				out <- time.Since(start)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return out
}

// rawRead reads the stream from sequence 1 to last with an ordered
// consumer (fetches of 2000), as audit.ReadLog did before it read with
// direct gets (docs/decisions.md 120), decoding only each message's
// metadata, and returns how many messages it read: the consumer baseline
// beside the direct one.
func (b *bench) rawRead(ctx context.Context, last uint64) (int, error) {
	s, err := b.js.Stream(ctx, stream.Name)
	if err != nil {
		return 0, err
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"ledger.>"},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		batch, err := cons.Fetch(2000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return n, err
		}
		got, end := 0, false
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return n, err
			}
			n++
			if md.Sequence.Stream >= last {
				// Done: the fetch would otherwise wait out its expiry
				// for messages that will not come.
				end = true
				break
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return n, err
		}
		if end {
			return n, nil
		}
		if got == 0 {
			if err := ctx.Err(); err != nil {
				return n, err
			}
			return n, fmt.Errorf("no more messages after %d of %d", n, last)
		}
	}
}

// cpuUse says how much CPU the process used over a step of d that
// handled n events: with an embedded NATS server, the server's share too
// ("" where it is not measured).
func cpuUse(cpu, d time.Duration, n int) string {
	if cpu <= 0 || d <= 0 || n <= 0 {
		return ""
	}
	return fmt.Sprintf("; process CPU %.2fs: %.2f cores (%.1f µs an event)", cpu.Seconds(), cpu.Seconds()/d.Seconds(), float64(cpu.Microseconds())/float64(n))
}
