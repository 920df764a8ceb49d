package projections

import (
	"context"
	"fmt"
)

// A projection folded up to a sequence and no further (`ledger replay
// --into`, a rebuild beside the live one) needs no durable consumer: it
// reads the range with direct gets (stream.Read), as the audit tools do,
// so it runs with the auditor's identity, which may hold no consumer, and
// leaves nothing on the stream whatever happens to it.

// WithUntil makes Run fold the log up to sequence seq (the stream's last
// when it starts, say), commit it, and return nil, reading with direct
// gets and creating no consumer. The name (WithName) is only its
// projector_offsets key then.
func WithUntil(seq uint64) Option { return func(c *config) { c.until = seq } }

// runUntil is Run for WithUntil: rebuild from PostgreSQL, then fold and
// write the committed sequence + 1 .. until in batches.
func (p *Projector) runUntil(ctx context.Context) error {
	if err := p.retry(ctx, "start", func() error { return p.start(ctx) }); err != nil {
		return err
	}
	p.folded = p.committed
	p.writer = p.startWriter(ctx)
	err := p.foldRange(ctx, p.committed+1, p.cfg.until)
	if werr := p.writer.stop(); err == nil {
		err = werr
	}
	if err == nil {
		p.saveResident() // the projector that takes over rebuilds none
	}
	return err
}

// foldRange folds the stream's messages from .. to and hands them to the
// writer a batch at a time; an event this build cannot fold ends it after
// what came before is written.
func (p *Projector) foldRange(ctx context.Context, from, to uint64) error {
	b := newBatch(p.folded)
	flush := func() error {
		if b.to == b.from {
			return nil
		}
		p.evict(b) // a rebuild of thousands of pools keeps the bound too
		f := b.finish()
		p.folded = b.to
		err := p.writer.submit(writeJob{b: b, f: f})
		b = newBatch(p.folded)
		return err
	}
	var stop error
	err := p.readDecoded(ctx, "", from, to, func(m *Decoded) error {
		if stop = p.fold(ctx, b, m); stop != nil {
			return stop
		}
		b.to = m.Seq
		if int(b.to-b.from) >= p.cfg.batchSize {
			return flush()
		}
		return nil
	})
	ferr := flush()
	if stop != nil {
		if err := p.writer.drain(); err != nil {
			return err
		}
		return fatalf("%v", stop)
	}
	if err != nil {
		return fmt.Errorf("read the stream from %d to %d: %w", from, to, err)
	}
	if ferr != nil {
		return ferr
	}
	return p.writer.drain()
}
