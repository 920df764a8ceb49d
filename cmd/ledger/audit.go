package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cluster-ledger/ledger/internal/redact"
	"io"
	"os"
	"time"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
)

// exitNotVerified is audit verify's exit status when it could not verify:
// 1 is a divergence found, 2 events no trusted key signed.
const exitNotVerified = 3

// logFlags are the addresses of the log and (optionally) the projection,
// and how its pools are folded.
type logFlags struct {
	natsURL, natsCreds, trustedKeys, databaseURL string
	// development folds plans naming the rules version in development, as
	// the projector of ledger dev --rules-development does: without it a
	// log that deployment wrote cannot be verified, replayed or explained
	// (decision 421).
	development bool
}

func (f *logFlags) register(cmd *cobra.Command) {
	addNATSURLFlag(cmd, &f.natsURL)
	addNATSCredsFlag(cmd, &f.natsCreds)
	addTrustedKeysFlag(cmd, &f.trustedKeys)
	addDatabaseURLFlag(cmd, &f.databaseURL)
}

// checkPoolFlag refuses a --pool that is no pool's name before it becomes
// a subject filter: "*" or ">" there are NATS wildcards, so "--pool '*'"
// read every pool's events as one pool's, and audit verify reported a
// divergence that was not there (decision 427). "" is every pool.
func checkPoolFlag(pool string) error {
	if pool == "" {
		return nil
	}
	if err := stream.ValidatePool(pool); err != nil {
		return fmt.Errorf("--pool: %w", err)
	}
	return nil
}

// registerDevelopment adds --rules-development, for the commands that fold
// a deployment's log (verify, replay, explain).
func (f *logFlags) registerDevelopment(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&f.development, "rules-development", false, fmt.Sprintf("fold plans naming rules version %d, in development, as the projector of 'ledger dev --rules-development' does (a log that deployment wrote needs it)", int(domain.RulesDevelopment)))
}

// replayOptions make the replay's pools as the projector made them.
func (f *logFlags) replayOptions() []audit.Option {
	if f.development {
		return []audit.Option{audit.WithDevelopmentRules()}
	}
	return nil
}

// hintDevelopment adds to a fold that stopped at a version this build does
// not fold without the switch what an operator of ledger dev
// --rules-development must add: the error alone says "needs a newer
// ledger", which the newest ledger does not cure.
func (f *logFlags) hintDevelopment(err error) error {
	if err != nil && !f.development && errors.Is(err, projections.ErrNeedsNewer) {
		return fmt.Errorf("%w (a log written by 'ledger dev --rules-development' needs --rules-development)", err)
	}
	return err
}

// openLog connects to NATS, failing fast when it is not there: an
// auditor wants an answer, not a wait.
func (f *logFlags) openLog() (jetstream.JetStream, func(), error) {
	return openJS(f.natsURL, f.natsCreds, "ledger-audit")
}

// keyring loads the trusted keys, completed by the historical keys the
// stream of js records (a restored log's); nil when none are given:
// events are then not authenticated, and a log the projector
// authenticated will not verify where it refused unsigned events.
func (f *logFlags) keyring(js jetstream.JetStream) (*signing.Keyring, error) {
	if f.trustedKeys == "" {
		return nil, nil
	}
	keys, err := signing.LoadKeyring(f.trustedKeys)
	if err != nil {
		return nil, err
	}
	keys.UseHistory(stream.HistorySource(js))
	return keys, nil
}

func (f *logFlags) openDB(ctx context.Context, required bool) (*pgxpool.Pool, error) {
	if f.databaseURL == "" {
		if required {
			return nil, errors.New("no database: set DATABASE_URL or --database-url")
		}
		return nil, nil
	}
	db, err := pgxpool.New(ctx, f.databaseURL)
	if err == nil {
		err = db.Ping(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL %s: %w", redact.Conn(f.databaseURL), redact.Error(err, f.databaseURL))
	}
	return db, nil
}

func init() {
	auditCmd := &cobra.Command{Use: "audit", Short: "Check the projection against the log"}
	auditCmd.AddCommand(verifyCommand())
	root.AddCommand(auditCmd, replayCommand(), explainCommand())
}

func verifyCommand() *cobra.Command {
	var f logFlags
	var from uint64
	var pool string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Replay the log and compare it with the projection, naming the first divergence",
		Long: `verify re-folds the LEDGER stream (from --from, each pool starting at its
nearest snapshot) with the same code as the projector and compares, event by
event, the projection's copy of the event, its hash-chain link and its
decisions; then each pool's allocations, consumer state and checkpoint. It
stops at the first divergence, names its sequence, what the log implies and
what the projection holds, and exits with status 1. When it cannot verify
(NATS or PostgreSQL unreachable or refusing, a log this build does not
fold, a bad flag) it says why and exits with status 3, so that 1 always
means a divergence.

verify reads the projection in one consistent snapshot (one read-only
REPEATABLE READ transaction) and replays each pool up to exactly its
checkpoint in that snapshot, so it may run while producers append and the
projector writes: events committed after the snapshot are not compared, and
the answer names the sequence it verified up to.

With --trusted-keys (what the projector was given), events no trusted key
signed are refused as unauthenticated, as the projector refuses them; verify
then names each such event and exits with status 2 when the projection
otherwise matches: someone wrote to the log around the ledger.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return codedError{err: err, code: exitNotVerified}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := runVerify(cmd.Context(), cmd.OutOrStdout(), f, from, pool)
			var ee exitError
			if err != nil && !errors.As(err, &ee) {
				// Not a verdict: the log or the projection could not be
				// read and compared (decision 430).
				return codedError{err: err, code: exitNotVerified}
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return codedError{err: err, code: exitNotVerified} })
	f.register(cmd)
	f.registerDevelopment(cmd)
	cmd.Flags().Uint64Var(&from, "from", 1, "first sequence to compare")
	cmd.Flags().StringVar(&pool, "pool", "", "only this `POOL` (default: every pool)")
	return cmd
}

// fromWithinLog refuses a --from past the log's end: verify answered
// "ok: 0 events ... match" (exit 0) and replay "replayed N events",
// having checked or printed nothing (decision 507, as explain --at).
func fromWithinLog(ctx context.Context, js jetstream.JetStream, from uint64, what string) error {
	if from <= 1 {
		return nil
	}
	end, err := stream.LastSeq(ctx, js.Conn())
	if err != nil {
		return fmt.Errorf("the log's last sequence: %w", err)
	}
	if from > end {
		return fmt.Errorf("--from %d: past the end of the log (its last sequence is %d): nothing to %s", from, end, what)
	}
	return nil
}

func runVerify(ctx context.Context, out io.Writer, f logFlags, from uint64, pool string) error {
	if err := checkPoolFlag(pool); err != nil {
		return err
	}
	js, closeNATS, err := f.openLog()
	if err != nil {
		return err
	}
	defer closeNATS()
	if err := fromWithinLog(ctx, js, from, "verify"); err != nil {
		return err
	}
	db, err := f.openDB(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	keys, err := f.keyring(js)
	if err != nil {
		return err
	}
	rep, err := audit.Verify(ctx, js, db, keys, from, pool, func(n int) { progress("verified %d events", n) }, f.replayOptions()...)
	clearProgress()
	err = f.hintDevelopment(err)
	var div *audit.Divergence
	if errors.As(err, &div) {
		fmt.Fprintf(out, "DIVERGENCE\n%v\n", div)
		return exitError{1}
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "ok: %d events of %d pools match the log up to sequence %d, the projection as committed at offset %d (%s)\n",
		rep.Events, rep.Pools, rep.UpTo, rep.Offset, time.Since(start).Round(time.Millisecond))
	if len(rep.Unauthenticated) > 0 {
		fmt.Fprintf(out, "UNAUTHENTICATED: the log holds %d events no trusted key signed (refused, they changed nothing):\n", len(rep.Unauthenticated))
		for _, u := range rep.Unauthenticated {
			fmt.Fprintf(out, "  pool %s, sequence %d, id %q: %s\n", u.Pool, u.Seq, u.ID, u.Reason)
		}
		return exitError{2}
	}
	return nil
}

func replayCommand() *cobra.Command {
	var f logFlags
	var from, to uint64
	var pool, into string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "replay",
		Short: "Re-fold the log from any offset and print its decisions, or rebuild a projection",
		Long: `replay reads the LEDGER stream from --from (to --to, default the end), folds
it with the same code as the projector, each pool starting at its nearest
snapshot at or before --from when DATABASE_URL is set (from the beginning
otherwise), and prints every decision: a table, or JSON lines with --json.
A progress line goes to stderr on long runs.

With --into URL it instead rebuilds the whole projection into an empty
PostgreSQL database, with the projector's own code.`,
		Example: `  ledger replay --from 1 --pool demo
  ledger replay --from 5000 --to 6000 --json | jq .
  ledger replay --into postgres://localhost/rebuilt`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if into != "" {
				return redact.Error(f.hintDevelopment(runRebuild(cmd.Context(), cmd.OutOrStdout(), f, into)), into)
			}
			return f.hintDevelopment(runReplay(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f, from, to, pool, asJSON))
		},
	}
	f.register(cmd)
	f.registerDevelopment(cmd)
	cmd.Flags().Uint64Var(&from, "from", 1, "first sequence to print")
	cmd.Flags().Uint64Var(&to, "to", 0, "last sequence to print (default: the end of the log)")
	cmd.Flags().StringVar(&pool, "pool", "", "only this `POOL` (default: every pool)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print decisions as JSON lines")
	cmd.Flags().StringVar(&into, "into", "", "rebuild the projection into the empty PostgreSQL database at `URL` instead of printing")
	return cmd
}

var errStop = errors.New("stop")

func runReplay(ctx context.Context, out, errOut io.Writer, f logFlags, from, to uint64, pool string, asJSON bool) error {
	if err := checkPoolFlag(pool); err != nil {
		return err
	}
	if to != 0 && to < from {
		// It replayed and printed nothing, with exit status 0.
		return fmt.Errorf("--to %d is before --from %d: nothing to replay", to, from)
	}
	js, closeNATS, err := f.openLog()
	if err != nil {
		return err
	}
	defer closeNATS()
	if err := fromWithinLog(ctx, js, from, "replay"); err != nil {
		return err
	}
	db, err := f.openDB(ctx, false)
	if err != nil {
		return err
	}
	if db != nil {
		defer db.Close()
	}
	r := audit.NewReplayer(db, from, f.replayOptions()...)
	keys, err := f.keyring(js)
	if err != nil {
		return err
	}
	r.Trust(keys)
	readFrom, err := r.ReadFrom(ctx, pool)
	if err != nil {
		return err
	}
	filter := "ledger.>"
	if pool != "" {
		filter = stream.PoolFilter(pool)
	}
	w := decisionWriter{out: out, json: asJSON}
	n, start := 0, time.Now()
	var unauthenticated []audit.Message // refused for want of a trusted signature
	err = audit.ReadLogTrusted(ctx, js, readFrom, filter, keys, func(m audit.Message) error {
		if to > 0 && m.Stored.Seq > to {
			return errStop
		}
		ev, ok, err := r.Fold(ctx, m)
		if err != nil || !ok {
			return err
		}
		n++
		if n%50000 == 0 {
			progress("replayed %d events, at sequence %d (%.0f events/s)", n, m.Stored.Seq, float64(n)/time.Since(start).Seconds())
		}
		if m.Stored.Seq >= from {
			w.write(m.Pool, ev)
			if ev.Stored.Gate != "" {
				unauthenticated = append(unauthenticated, ev.Message)
			}
		}
		return nil
	})
	clearProgress()
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	fmt.Fprintf(errOut, "replayed %d events in %s\n", n, time.Since(start).Round(time.Millisecond))
	return reportUnauthenticated(errOut, unauthenticated)
}

// reportUnauthenticated names the events a fold of the log refused for
// want of a trusted signature and exits with status 2, as audit verify
// does: a fold that refused them did not give the ledger's decisions
// (wrong --trusted-keys, or events published around the ledger).
func reportUnauthenticated(out io.Writer, refused []audit.Message) error {
	if len(refused) == 0 {
		return nil
	}
	fmt.Fprintf(out, "UNAUTHENTICATED: %d events no trusted key signed were refused (they changed nothing):\n", len(refused))
	for i, m := range refused {
		if i == 20 {
			fmt.Fprintf(out, "  ...\n")
			break
		}
		fmt.Fprintf(out, "  pool %s, sequence %d, id %q: %s\n", m.Pool, m.Stored.Seq, m.Stored.Envelope.ID, m.Stored.Gate)
	}
	return exitError{2}
}

type decisionWriter struct {
	out  io.Writer
	json bool
}

func (w decisionWriter) write(pool string, ev audit.Event) {
	if ev.Result.Refused != "" {
		if !w.json {
			fmt.Fprintf(w.out, "%s %d refused: %s\n", pool, ev.Stored.Seq, ev.Result.Refused)
		}
		return
	}
	for _, d := range ev.Result.Decisions {
		if w.json {
			b, _ := json.Marshal(struct {
				Pool string `json:"pool"`
				domain.Decision
			}{pool, d})
			fmt.Fprintln(w.out, string(b))
			continue
		}
		from := ""
		if d.From != "" {
			from = " from " + d.From
		}
		fmt.Fprintf(w.out, "%s %d.%d %s %s%s: %d on %s [%s]\n", pool, d.Seq, d.Ordinal, d.Kind, d.Consumer, from, d.Slots, d.Host, d.Rule)
	}
}

// progress rewrites one status line on stderr when stderr is a terminal;
// otherwise it prints nothing, so logs and pipes stay clean.
func progress(format string, args ...any) {
	if stderrIsTerminal() {
		progressShown = true
		fmt.Fprintf(os.Stderr, "\r"+format+"    ", args...)
	}
}

var progressShown bool

func clearProgress() {
	if progressShown {
		fmt.Fprint(os.Stderr, "\r\033[K")
		progressShown = false
	}
}

func stderrIsTerminal() bool {
	fi, err := os.Stderr.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
