package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/projections"
)

// errAppendRefused: NATS refused recover's appends (an identity without
// the right to publish events).
var errAppendRefused = errors.New("recover: appends refused")

func init() {
	var f logFlags
	cmd := &cobra.Command{
		Use:   "recover",
		Short: "Give the stream back the events it lost, from the projection in PostgreSQL",
		Long: `recover repairs the state a crash of the NATS machine can leave when JetStream
had not synced its last writes (--nats-sync interval:...): the projection in
PostgreSQL is ahead of the stream. The events table keeps every projected
event's stored message (subject, headers, body), so recover first compares
the part of the stream that survived with it (from the oldest snapshot the
projector would fold from) and then appends the missing events again, in
order, with their original ids, each expecting the stream to end just
before it: every event gets back exactly its original sequence. The
projection's end is the furthest offset any projector (or partition) has
committed.

If the stream and the projection disagree in content, not only in length,
recover stops before appending anything and names the first sequence where
they differ (exit status 1). A stream that is not behind is left alone.

The projector does the same by itself when it starts or reconnects; the
ledger API answers appends with 503 (reason "healing", Retry-After) until
the stream has caught up. recover is for running it by hand, e.g. before
starting the services. It appends, so it runs as the ledger identity
(--nats-creds: the ledger's seed, DATA/nats-auth/ledger.nk under ledger
dev; the auditor's, which ledger dev prints, may not append, and recover
says so) and reads PostgreSQL as the reporting role. With --trusted-keys
(LEDGER_TRUSTED_KEYS, which ledger dev prints) it appends again only
events those keys signed: a message in PostgreSQL no trusted key signed
(a row the projector's role could have written) makes it refuse, naming
the sequence, with nothing appended.`,
		Example: `  ledger recover --nats-url nats://127.0.0.1:4222 --database-url postgres://...`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRecover(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	f.register(cmd)
	root.AddCommand(cmd)
}

func runRecover(ctx context.Context, out io.Writer, f logFlags) error {
	db, err := f.openDB(ctx, true)
	if err != nil {
		return err
	}
	defer db.Close()
	// recover appends, which only the ledger identity (and admin) may: a
	// publish NATS refuses gets no answer, only an asynchronous
	// permissions error, and the heal waited for its acknowledgement for
	// ever (decision 428). The first such error ends it, saying so.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	refused := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			cancel(fmt.Errorf("%w: NATS refused this identity's appends (%v); recover appends the lost events again, as the ledger identity does: --nats-creds or %s naming its seed (ledger dev: DATA/nats-auth/ledger.nk; the printed auditor's may not append)", errAppendRefused, err, EnvNATSCreds))
		}
	})
	nc, err := natsauth.Connect(f.natsURL, f.natsCreds, nats.Name("ledger-recover"), nats.Timeout(5*time.Second), refused)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []projections.Option{projections.WithLogger(log)}
	// With the trusted keys, only events the ledger signed are appended
	// again (decision 497); --trusted-keys was taken and ignored before.
	keys, err := f.keyring(js)
	if err != nil {
		return err
	}
	if keys != nil {
		opts = append(opts, projections.WithTrustedKeys(keys))
	}
	rep, err := projections.New(js, db, opts...).Heal(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, errAppendRefused) {
		return cause
	}
	if err != nil {
		return err
	}
	if rep.Republished == 0 {
		fmt.Fprintf(out, "nothing to recover: the stream ends at %d, the projection is at %d\n", rep.StreamLast, rep.Committed)
		return nil
	}
	fmt.Fprintf(out, "recovered %d events: the stream ended at %d, it now ends at %d like the projection (%d surviving messages compared)\n",
		rep.Republished, rep.StreamLast, rep.Committed, rep.Compared)
	return nil
}
