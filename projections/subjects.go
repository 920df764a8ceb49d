package projections

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/stream"
)

// Partitions that read only their own events (docs/decisions.md
// #309-#312).
//
// A stream whose subjects carry the pool's partition (internal/stream:
// ledger.<pool>.<type>.<k>, k = FNV-1a(pool) mod S, computed by NATS as
// it stores the event) lets partition k of n filter to its own subjects
// when n divides S: a pool's partition among n is its partition among S
// modulo n, so partition k's consumer filters to ledger.*.*.j for every
// j = k mod n, plus ledger.*.* for the events of a migrated stream
// stored before it had partitions. Each event is then delivered to one
// partition, not to every one.
//
// What changes with it:
//   - Gaps. A partition's events are no longer consecutive stream
//     sequences. The consumer's delivery sequence is: every delivery,
//     redeliveries included, numbers one more, and first deliveries come
//     in stream order. So a first delivery whose number follows that of
//     the last first delivery taken has nothing of the partition between
//     the two. Anything else (the first message after taking the
//     partition over, a redelivery just before, a delivery missed, a
//     reset of the consumer, which numbers from 1 again) is checked
//     against the stream: the partition's events between the folded
//     sequence and the message are read with direct gets on the
//     partition's subjects and folded first (fill). A check that finds
//     nothing costs a read.
//   - The offset. A partition's offset still means "every event of the
//     partition up to here is folded", but its own events no longer
//     carry it to the stream's end. When its feed has been quiet for a
//     moment the holder reads the stream's last sequence, and if none of
//     its subjects holds an event after its offset up to there, commits
//     the offset there (advanceQuiet). A partition that nobody holds
//     (nothing was ever delivered to it, so NATS pinned no instance) is
//     moved the same way by any instance, guarded by the offset it read
//     (advanceUnheld). Readers that wait for "the projection reached
//     sequence s" (ProjectorOffset with every partition) keep working.
//   - A stream without partitions, or a count n does not divide, is read
//     as before: every partition reads every event and skips the
//     others' (legacy mode, logged once).

// quietWait is how long a holder's feed stays idle before it moves the
// partition's offset to the stream's end (advanceQuiet).
const quietWait = 50 * time.Millisecond

// partitionFilters are the filter subjects of partition k of n on a
// stream of cfg, or nil when the stream's subjects cannot serve it
// (legacy mode: "ledger.>", every event).
func (p *Projector) partitionFilters(cfg jetstream.StreamConfig) []string {
	pt := p.cfg.part
	s := stream.Partitions(cfg)
	if s == 0 || s%pt.n != 0 {
		if s > 0 {
			p.cfg.log.Warn("projector: the stream's partitions are not a multiple of --partitions; every partition reads the whole stream",
				"stream_partitions", s, "partitions", pt.n)
		} else {
			p.cfg.log.Warn("projector: the stream's subjects carry no partition (run `ledger nats setup` to migrate it); every partition reads the whole stream",
				"partitions", pt.n)
		}
		return nil
	}
	var f []string
	if stream.PartitionedFrom(cfg) != 1 {
		f = append(f, stream.LegacyFilter)
	}
	for j := pt.k; j < s; j += pt.n {
		f = append(f, stream.PartitionFilter(j))
	}
	return f
}

// partitionConsumerConfig is the consumer of the partition, filtered to
// p.filters (every event when nil).
func (p *Projector) partitionConsumerConfig() jetstream.ConsumerConfig {
	pt := p.cfg.part
	cfg := jetstream.ConsumerConfig{
		Durable:       p.offsetName(),
		Description:   fmt.Sprintf("ledger projector: partition %d of %d", pt.k, pt.n),
		AckPolicy:     jetstream.AckAllPolicy,
		AckWait:       p.partitionAckWait(),
		MaxAckPending: p.maxAckPending(),
		// DeliverAll, so that the consumer may be reset to any
		// sequence (JetStream refuses one below a start sequence).
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PriorityGroups: []string{PriorityGroup},
		PinnedTTL:      p.cfg.pinnedTTL,
	}
	if p.filters == nil {
		cfg.FilterSubject = "ledger.>"
	} else {
		cfg.FilterSubjects = p.filters
	}
	return cfg
}

// consumerFilters are the filter subjects a consumer's configuration
// names.
func consumerFilters(c jetstream.ConsumerConfig) []string {
	if len(c.FilterSubjects) > 0 {
		return c.FilterSubjects
	}
	if c.FilterSubject != "" {
		return []string{c.FilterSubject}
	}
	return []string{">"}
}

// legacyUntil is the last sequence that may hold an event stored before
// the stream had partitions: 0 when none may, the end of any range when
// it is not known.
func (p *Projector) legacyUntil() uint64 {
	switch {
	case p.partitionedFrom == 0:
		return ^uint64(0)
	default:
		return p.partitionedFrom - 1
	}
}

// fillChunk bounds the sequences a filtered gap fill reads at once.
const fillChunk = 4096

// fillFiltered folds into b the events of the partition after b.to and
// before to that the consumer did not deliver in order, read from the
// stream with direct gets on the partition's subjects, merged in stream
// order; b.to ends at to-1.
func (p *Projector) fillFiltered(ctx context.Context, b *batch, to uint64, bg *budget) error {
	for lo := b.to + 1; lo < to; lo += fillChunk {
		hi := min(lo+fillChunk-1, to-1)
		var msgs []stream.Msg
		for _, f := range p.filters {
			from, upto := lo, hi
			if f == stream.LegacyFilter {
				upto = min(hi, p.legacyUntil())
			}
			err := stream.Read(ctx, p.js.Conn(), f, from, upto, func(m stream.Msg) error {
				msgs = append(msgs, m)
				return nil
			})
			if err != nil {
				return fmt.Errorf("read partition %s from %d to %d: %w", p.offsetName(), from, upto, err)
			}
		}
		slices.SortFunc(msgs, func(a, b stream.Msg) int { return cmp.Compare(a.Seq, b.Seq) })
		dec := make([]Decoded, len(msgs))
		DecodeAll(p.cfg.keys, p.wants(), msgs, dec)
		for i := range dec {
			if dec[i].Seq <= b.to {
				continue // two filters cannot match one subject; never twice all the same
			}
			if err := p.take(ctx, b, bg, &dec[i], true); err != nil {
				return err // the fold's own, as it is (fill says why)
			}
			b.to = dec[i].Seq
		}
		b.to = hi
	}
	return nil
}

// ownAfter reports whether any of the partition's subjects holds an
// event stored at a sequence from from to last.
func (p *Projector) ownAfter(ctx context.Context, from, last uint64) (bool, error) {
	for _, f := range p.filters {
		if f == stream.LegacyFilter && from > p.legacyUntil() {
			continue
		}
		m, err := request(ctx, p, func(ctx context.Context) (*stream.Msg, error) {
			m, ok, err := stream.Next(ctx, p.js.Conn(), from, f)
			if !ok {
				return nil, err
			}
			return &m, err
		})
		if err != nil {
			return false, err // the first lost answer ends the look: asked again later
		}
		if m != nil && m.Seq <= last {
			return true, nil
		}
	}
	return false, nil
}

// advanceQuiet moves the offset of the partition this instance holds to
// the stream's last sequence when none of the partition's events lies
// between its offset and there. It runs when the feed was quiet for
// quietWait.
func (p *Projector) advanceQuiet(ctx context.Context) error {
	p.advance = false
	if err := p.writer.drain(); err != nil {
		return err
	}
	last, err := request(ctx, p, func(ctx context.Context) (uint64, error) { return stream.LastSeq(ctx, p.js.Conn()) })
	if err != nil || last <= p.folded {
		return nil // NATS away: the next quiet spell tries again
	}
	own, err := p.ownAfter(ctx, p.folded+1, last)
	if err != nil || own {
		return nil // the consumer delivers them (or the stall check finds them)
	}
	b := newBatch(p.folded)
	b.to = last
	f := b.finish()
	p.folded = last
	return p.writer.submit(writeJob{b: b, f: f})
}

// sqlAdvanceUnheld moves a partition's offset from the value it was
// read at ($6) to $2, and nothing else; sqlStartUnheld makes the row of a
// partition that never committed.
const (
	sqlAdvanceUnheld = `UPDATE projector_offsets SET stream_seq = $2, updated_at = now(), owner = $3 WHERE name = $1 AND stream_seq = $4`
	sqlStartUnheld   = `INSERT INTO projector_offsets (name, stream_seq, updated_at, partition, partitions, owner)
VALUES ($1, $2, now(), $3, $4, $5) ON CONFLICT (name) DO NOTHING`
)

// advanceUnheld moves the offset of a partition no instance holds (NATS
// pins none: nothing was delivered to it lately) from committed to last,
// when none of its events lies between. Guarded by committed: an
// instance that folded meanwhile keeps its commit, and one that holds
// the partition without having folded anything there finds the offset
// moved at its next commit and takes the partition again from
// PostgreSQL (ErrPartitionLost), which costs a rebuild, never a row.
func (p *Projector) advanceUnheld(ctx context.Context, committed, last uint64) error {
	info, err := request(ctx, p, p.cons.Info)
	if err != nil {
		return err
	}
	for _, pg := range info.PriorityGroups {
		if pg.PinnedClientID != "" {
			return nil // held: the holder moves it
		}
	}
	tx, err := p.db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := p.checkPartitioning(ctx, tx); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, sqlAdvanceUnheld, p.offsetName(), int64(last), p.cfg.instance, int64(committed))
	if err == nil && tag.RowsAffected() == 0 && committed == 0 {
		k, n := p.partitionCols()
		_, err = tx.Exec(ctx, sqlStartUnheld, p.offsetName(), int64(last), k, n, p.cfg.instance)
	}
	if err != nil {
		return fmt.Errorf("advance partition %s: %w", p.offsetName(), err)
	}
	return tx.Commit(ctx)
}
