package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/explain"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/spf13/cobra"
)

func explainCommand() *cobra.Command {
	var f logFlags
	var pool, consumer, at, file string
	var keep int
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Tell why a consumer holds what it holds, in words",
		Long: `explain replays a pool's log (or, with --file, a scenario in memory) up to
--at (a sequence, or an RFC 3339 time; default the end) and prints the
consumer's demand, planned share, guarantee or target, its slots per host,
and the decisions that produced them: which rule, from whom, and why that
victim rather than another. In a pool with ownership it also tells what the
consumer owns, where (rank among its siblings, preference), where its slots
come from, what it lent while idle and to whom, and when it took its slots
back (return, deadline, lend grace).

--rules-development folds under the rules version in development (today
version 4's priority bands, non-preemptable consumers and zero shares):
with --file as ledger simulate --rules-development does, with --pool as
the projector of ledger dev --rules-development does (a log that
deployment wrote needs it).`,
		Example: `  ledger explain --pool demo --consumer /eng/dev
  ledger explain --pool demo --consumer /C --at 1200
  ledger explain --file test/scenarios/seed/seed-000-priority-reclaim.yaml --consumer /C
  ledger explain --file internal/scenario/testdata/ownership/ml-lends-gpu.yaml --consumer /ml --at 6
  ledger explain --rules-development --file test/development/v4/d-pin-1-leaf-under-preemptable-parent.yaml --consumer /A/q`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			limit, err := parseAt(at)
			if err != nil {
				return err
			}
			story := explain.New(consumer, keep)
			var p *domain.Pool
			var refused []audit.Message
			if file != "" {
				p, err = explainScenario(file, story, limit, f.development)
			} else if err = checkPoolFlag(pool); err == nil && pool == "" {
				err = errors.New("--pool: explain needs a pool (or --file)")
			} else if err == nil {
				p, refused, err = explainLog(cmd.Context(), f, pool, story, limit)
				err = f.hintDevelopment(err)
			}
			if err != nil {
				return err
			}
			if err := story.Write(cmd.OutOrStdout(), p); err != nil {
				return err
			}
			return reportUnauthenticated(cmd.OutOrStdout(), refused)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&pool, "pool", "default", "`POOL` to explain")
	cmd.Flags().StringVar(&consumer, "consumer", "", "consumer `PATH` (required)")
	cmd.Flags().StringVar(&at, "at", "", "stop at this `SEQ|TIME`: a sequence or an RFC 3339 time (default: the end)")
	cmd.Flags().StringVar(&file, "file", "", "explain a scenario `FILE` folded in memory instead of the log")
	cmd.Flags().IntVar(&keep, "last", 20, "how many of the consumer's decisions to show")
	cmd.Flags().BoolVar(&f.development, "rules-development", false, fmt.Sprintf("fold under rules version %d, in development: --file as ledger simulate --rules-development does, --pool as the projector of 'ledger dev --rules-development' (a log that deployment wrote needs it)", int(domain.RulesDevelopment)))
	_ = cmd.MarkFlagRequired("consumer")
	return cmd
}

// limit says where explain stops: after sequence seq, or after the last
// event at or before time t.
type limit struct {
	seq uint64
	t   time.Time
}

func parseAt(at string) (limit, error) {
	if at == "" {
		return limit{}, nil
	}
	// 0 and the zero time are the limit's "not given" (the end): taken
	// as such they answered about the end of the pool when asked about
	// before its first event, so they are refused.
	if seq, err := strconv.ParseUint(at, 10, 64); err == nil {
		if seq == 0 {
			return limit{}, fmt.Errorf("--at 0: sequences start at 1 (leave --at out for the end)")
		}
		return limit{seq: seq}, nil
	}
	t, err := events.ParseTime(at)
	if err != nil {
		return limit{}, fmt.Errorf("--at: want a sequence number, or a time: %w", err)
	}
	if t.IsZero() {
		return limit{}, fmt.Errorf("--at %q: before every event of every pool (leave --at out for the end)", at)
	}
	return limit{t: t}, nil
}

// String is the limit as --at gave it.
func (l limit) String() string {
	if l.seq > 0 {
		return strconv.FormatUint(l.seq, 10)
	}
	return l.t.Format(time.RFC3339Nano)
}

func (l limit) past(seq uint64, at time.Time) bool {
	return (l.seq > 0 && seq > l.seq) || (!l.t.IsZero() && at.After(l.t))
}

// explainLog folds pool's log into story; refused are the events it
// refused for want of a trusted signature.
func explainLog(ctx context.Context, f logFlags, pool string, story *explain.Story, lim limit) (last *domain.Pool, refused []audit.Message, err error) {
	js, closeNATS, err := f.openLog()
	if err != nil {
		return nil, nil, err
	}
	defer closeNATS()
	r := audit.NewReplayer(nil, 1, f.replayOptions()...)
	keys, err := f.keyring(js)
	if err != nil {
		return nil, nil, err
	}
	r.Trust(keys)
	err = audit.ReadLogTrusted(ctx, js, 1, stream.PoolFilter(pool), keys, func(m audit.Message) error {
		if lim.past(m.Stored.Seq, m.Stored.Envelope.Time) {
			if lim.seq > 0 {
				return errStop
			}
			// A time is passed only by an event the ledger stamped: one
			// published around it carries any time (decision 530).
			stamped, err := r.Stamped(&m)
			if err != nil {
				return err
			}
			if stamped {
				return errStop
			}
		}
		ev, ok, err := r.Fold(ctx, m)
		if err != nil || !ok {
			return err
		}
		last = ev.Pool
		if ev.Stored.Gate != "" {
			refused = append(refused, ev.Message)
		}
		story.After(ev.Pool, m.Stored.Seq, m.Stored.Envelope.Time, ev.Result.Decisions)
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, nil, err
	}
	if last == nil && errors.Is(err, errStop) {
		return nil, nil, fmt.Errorf("pool %s has no event at or before --at %s", pool, lim)
	}
	if last == nil {
		return nil, nil, fmt.Errorf("pool %s has no events in the log", pool)
	}
	if lim.seq > last.Seq() {
		// A sequence the log does not have yet was answered with the
		// pool's last event as if it were that point (decision 507).
		end, err := stream.LastSeq(ctx, js.Conn())
		if err != nil {
			return nil, nil, fmt.Errorf("--at %d: the log's last sequence: %w", lim.seq, err)
		}
		if lim.seq > end {
			return nil, nil, fmt.Errorf("--at %d: past the end of the log (its last sequence is %d); pool %s's last event is sequence %d",
				lim.seq, end, pool, last.Seq())
		}
	}
	return last, refused, nil
}

func explainScenario(file string, story *explain.Story, lim limit, development bool) (*domain.Pool, error) {
	s, err := scenario.ParseFile(file)
	if err != nil {
		return nil, err
	}
	rules := domain.RulesNewest
	var opts []domain.PoolOption
	if development {
		rules, opts = domain.RulesDevelopment, []domain.PoolOption{domain.WithDevelopmentRules()}
	}
	p := domain.NewPool(s.Pool, opts...)
	tl := scenario.NewTimeline()
	evs := s.Events()
	for i, ev := range evs {
		at := tl.At(ev.Time)
		if lim.past(p.Seq()+1, at) {
			break
		}
		// As the service would append it (and as simulate folds it): a
		// plan naming no rules version runs under the newest (or the one
		// in development).
		ds, err := p.Apply(domain.Event{Seq: p.Seq() + 1, Time: at, Payload: domain.StampRulesAs(ev.Payload, rules)})
		if err == nil {
			story.After(p, p.Seq(), at, ds.Decisions)
		} else if i == 0 {
			// Without its plan the scenario has no consumer to explain.
			return nil, fmt.Errorf("%s: the scenario's plan was refused: %w", file, err)
		}
	}
	return p, nil
}
