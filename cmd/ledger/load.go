package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/redact"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/scenario"
	"github.com/cluster-ledger/ledger/projections/query"
)

type loadFlags struct {
	ledgerURL, token, databaseURL string
	freshPool, check              bool
	timeout                       time.Duration
}

func init() {
	var f loadFlags
	cmd := &cobra.Command{
		Use:   "load FILE...",
		Short: "Send scenario files' events through the service, optionally checking the projection",
		Long: `load sends each scenario's plan, hosts and step events through the ledger's
HTTP API, one event at a time, in the file's order. Times are stamped by
the ledger (a scenario's own times are for 'ledger simulate' only). An
event the ledger refuses counts as rejected for its step.

With --check, after each step load waits until the projector has applied
the step's last event (checkpoints in PostgreSQL), then compares the
step's expect (allocations, decisions with their rule and deadline when
given, rejected) with the projected tables, prints ok or FAIL with the
differences, and exits with status 1 if any step fails. A deadline is
compared as an offset from the time the ledger stamped on its event.

The pool is the scenario's, or with --fresh-pool a new one per file
(<pool>-<random suffix>), so a file can be loaded again from scratch.`,
		Example: `  ledger load --fresh-pool --check test/scenarios/seed/*.yaml
  LEDGER_URL=http://127.0.0.1:8080 ledger load scenario.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, files []string) error {
			return runLoad(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), files, f)
		},
	}
	addLedgerURLFlag(cmd, &f.ledgerURL)
	addLedgerTokenFlag(cmd, &f.token)
	cmd.Flags().StringVar(&f.ledgerURL, "url", f.ledgerURL, "ledger HTTP API base `URL`, the same as --ledger-url")
	addDatabaseURLFlag(cmd, &f.databaseURL)
	cmd.Flags().BoolVar(&f.freshPool, "fresh-pool", false, "load each file into a new pool <pool>-<random suffix>")
	cmd.Flags().BoolVar(&f.check, "check", false, "check each step's expect against PostgreSQL (needs --database-url)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "how long to wait for the ledger or the projector")
	root.AddCommand(cmd)
}

func runLoad(ctx context.Context, out, errOut io.Writer, files []string, f loadFlags) error {
	l := &loader{c: client.New(f.ledgerURL, client.WithToken(f.token), client.FailFastWhenDown()), out: out, errOut: errOut, f: f}
	if f.check {
		if f.databaseURL == "" {
			return errors.New("--check reads the projection: set DATABASE_URL or --database-url")
		}
		db, err := pgxpool.New(ctx, f.databaseURL)
		if err != nil {
			return fmt.Errorf("database: %w", redact.Error(err, f.databaseURL))
		}
		defer db.Close()
		l.db = db
	}
	failed := 0
	for _, file := range files {
		ok, err := l.file(ctx, file)
		if err != nil {
			// Printed here, not by main's redaction: a password of
			// --ledger-url or --database-url, and the token, stay hidden.
			fmt.Fprintf(out, "   FAIL %v\n", redact.Secrets(redact.Error(err, f.ledgerURL, f.databaseURL), f.token))
		}
		if err != nil || !ok {
			failed++
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	fmt.Fprintf(out, "%d scenarios: %d passed, %d failed\n", len(files), len(files)-failed, failed)
	if failed > 0 {
		return exitError{1}
	}
	return nil
}

// loader sends scenarios through one ledger.
type loader struct {
	c       *client.Client
	db      *pgxpool.Pool
	out     io.Writer
	errOut  io.Writer
	f       loadFlags
	sent    int
	shownAt time.Time
}

// file loads one scenario; ok is false when an expectation failed or a
// setup event was refused.
func (l *loader) file(ctx context.Context, path string) (ok bool, err error) {
	s, err := scenario.ParseFile(path)
	if err != nil {
		return false, err
	}
	pool := s.Pool
	if l.f.freshPool {
		pool += "-" + client.NewID()[:8]
	}
	fmt.Fprintf(l.out, "== %s (%s) pool %s\n", s.Name, path, pool)
	var last uint64
	ok = true
	for i, ev := range s.Setup() {
		seq, refusal, err := l.send(ctx, pool, ev.Payload)
		if err != nil {
			return false, fmt.Errorf("%s: setup event %d: %w", path, i+1, err)
		}
		if refusal != nil {
			fmt.Fprintf(l.out, "   FAIL setup event %d refused: %v\n", i+1, refusal)
			ok = false
			continue
		}
		last = seq
	}
	for i := range s.Steps {
		stepOK, err := l.step(ctx, pool, s, i, &last)
		if err != nil {
			return false, fmt.Errorf("%s: step %d: %w", path, i+1, err)
		}
		ok = ok && stepOK
	}
	return ok, nil
}

// step sends a step's events and, with --check, checks its expect.
func (l *loader) step(ctx context.Context, pool string, s *scenario.Scenario, i int, last *uint64) (bool, error) {
	st := s.Steps[i]
	before, rejected := *last, 0
	for _, ev := range st.Events {
		l.progress(s, i)
		seq, refusal, err := l.send(ctx, pool, ev.Payload)
		if err != nil {
			return false, err
		}
		if refusal != nil {
			rejected++
			continue
		}
		*last = seq
	}
	label := fmt.Sprintf("step %d", i+1)
	if st.Name != "" {
		label += ": " + st.Name
	}
	if !l.f.check {
		fmt.Fprintf(l.out, "   sent %s: %d accepted (last seq %d), %d rejected\n", label, len(st.Events)-rejected, *last, rejected)
		return true, nil
	}
	obs, err := l.observe(ctx, pool, before, *last, rejected)
	if err != nil {
		return false, err
	}
	// An event the ledger accepted but the projector refused for want of
	// a trusted signature: the projection is not the ledger's.
	if refused, err := query.Unauthenticated(ctx, l.db, pool, before, 1); err != nil {
		return false, err
	} else if len(refused) > 0 && uint64(refused[0].Seq) <= *last {
		fmt.Fprintf(l.out, "   FAIL %s\n     sequence %d (id %q) refused as unauthenticated: the projector does not trust the key the ledger signs with\n",
			label, refused[0].Seq, refused[0].ID)
		return false, nil
	}
	if diffs := st.Expect.Check(obs); len(diffs) > 0 {
		fmt.Fprintf(l.out, "   FAIL %s\n     %s\n", label, strings.Join(diffs, "\n     "))
		return false, nil
	}
	fmt.Fprintf(l.out, "   ok   %s\n", label)
	return true, nil
}

// send appends one event; a refusal by the rules (422) is returned as
// refusal, anything else that fails as err.
func (l *loader) send(ctx context.Context, pool string, p events.Payload) (seq uint64, refusal, err error) {
	ev, err := client.NewEvent(p)
	if err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, l.f.timeout)
	defer cancel()
	res, err := l.c.Append(ctx, pool, ev)
	var ce *client.Error
	// The event itself refused (422, or a 4xx naming the event, like a plan
	// asking for a rules version this ledger does not have): it counts as
	// rejected. Anything else is the request's or the service's problem.
	if errors.As(err, &ce) && (ce.Status == http.StatusUnprocessableEntity || (ce.Refused() && ce.Index != nil)) {
		return 0, err, nil
	}
	if err != nil {
		return 0, nil, err
	}
	l.sent++
	return res[0].Seq, nil, nil
}

// progress shows on stderr where a long load is, every few seconds.
func (l *loader) progress(s *scenario.Scenario, i int) {
	if l.shownAt.IsZero() {
		l.shownAt = time.Now()
	}
	if time.Since(l.shownAt) < 2*time.Second {
		return
	}
	l.shownAt = time.Now()
	fmt.Fprintf(l.errOut, "load: %s: step %d/%d, %d events sent\n", s.File, i+1, len(s.Steps), l.sent)
}

// observe waits until the projector has applied last, then reads the
// pool's consumers and the decisions of the events after before.
func (l *loader) observe(ctx context.Context, pool string, before, last uint64, rejected int) (scenario.Observed, error) {
	if err := l.waitProjected(ctx, pool, last); err != nil {
		return scenario.Observed{}, err
	}
	obs := scenario.Observed{Allocated: map[string]int64{}, Rejected: rejected, Decisions: []domain.Decision{}}
	err := query.ReadOnly(ctx, l.db, func(q query.Querier) error {
		return readObserved(ctx, q, pool, before, last, &obs)
	})
	return obs, err
}

func readObserved(ctx context.Context, q query.Querier, pool string, before, last uint64, obs *scenario.Observed) error {
	states, err := query.ConsumerStates(ctx, q, pool)
	if err != nil {
		return err
	}
	for _, c := range states {
		obs.Allocated[c.Path] = c.Allocated
		if c.Leaf {
			obs.Leaves = append(obs.Leaves, c.Path)
		}
	}
	ds, err := query.DecisionsBetween(ctx, q, pool, before, last)
	if err != nil {
		return err
	}
	for _, d := range ds {
		obs.Decisions = append(obs.Decisions, domain.Decision{Seq: d.EventSeq, Ordinal: d.Ordinal, Kind: domain.Kind(d.Kind),
			Consumer: d.Consumer, From: d.FromConsumer, Host: d.Host, Slots: d.Slots, Rule: domain.Rule(d.Rule), Deadline: d.Deadline})
	}
	// The ledger stamped the times: an expected deadline is an offset from
	// them, compared at the precision PostgreSQL keeps both in.
	obs.Times, err = query.StoredEventTimes(ctx, q, pool, before, last)
	return err
}

// waitProjected polls the pool's checkpoint until it reaches seq.
func (l *loader) waitProjected(ctx context.Context, pool string, seq uint64) error {
	if seq == 0 {
		return nil
	}
	deadline := time.Now().Add(l.f.timeout)
	for {
		got, err := query.ProjectedSeq(ctx, l.db, pool)
		if err != nil {
			return err
		}
		if got >= seq {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for the projector: pool %s is projected up to seq %d, want %d (is the projector running on this database?)",
				l.f.timeout, pool, got, seq)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
