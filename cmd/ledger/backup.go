package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/backup"
	"github.com/cluster-ledger/ledger/internal/natsauth"
)

func init() {
	var natsURL, natsCreds, file string
	backupCmd := &cobra.Command{
		Use:   "backup",
		Short: "Copy the LEDGER stream to a file (read rights are enough: the auditor identity)",
		Long: `backup writes every message of the LEDGER stream, in sequence order, to a
file of JSON lines (--out, "-" for stdout): sequence, subject, event id,
the ledger's signature and the body. Restore it with 'ledger restore' on a
fresh server, then rebuild the projection with 'ledger replay --into'.`,
		Example: `  ledger backup --out ledger-$(date +%F).jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBackup(cmd.Context(), cmd.OutOrStdout(), natsURL, natsCreds, file)
		},
	}
	addNATSURLFlag(backupCmd, &natsURL)
	addNATSCredsFlag(backupCmd, &natsCreds)
	backupCmd.Flags().StringVar(&file, "out", "", "file to write (\"-\": standard output)")
	_ = backupCmd.MarkFlagRequired("out")

	var rNATSURL, rNATSCreds, in string
	restoreCmd := &cobra.Command{
		Use:   "restore",
		Short: "Publish a backup into an empty LEDGER stream, each message at its original sequence (admin identity)",
		Long: `restore reads a file written by 'ledger backup' and publishes its messages, in
order, into the LEDGER stream of the server at --nats-url, creating the
stream when missing. The stream must be empty (a fresh server). Every
message must land at its original sequence, with its signature, or restore
stops and says where. Only the admin identity may create the stream and
publish these messages. Then rebuild the projection:
  ledger replay --into postgres://.../empty_database
and check it: ledger audit verify.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRestore(cmd.Context(), cmd.OutOrStdout(), rNATSURL, rNATSCreds, in)
		},
	}
	addNATSURLFlag(restoreCmd, &rNATSURL)
	addNATSCredsFlag(restoreCmd, &rNATSCreds)
	restoreCmd.Flags().StringVar(&in, "in", "", "backup file to restore (\"-\": standard input)")
	_ = restoreCmd.MarkFlagRequired("in")
	root.AddCommand(backupCmd, restoreCmd)
}

// openJS connects to NATS as the identity in creds, failing fast (5 s)
// when it is not there: an operator's command wants an answer, not a wait.
func openJS(url, creds, name string) (jetstream.JetStream, func(), error) {
	nc, err := natsauth.Connect(url, creds, nats.Name(name), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return js, nc.Close, nil
}

func runBackup(ctx context.Context, out io.Writer, url, creds, file string) error {
	js, done, err := openJS(url, creds, "ledger-backup")
	if err != nil {
		return err
	}
	defer done()
	w, report := out, os.Stderr
	if file != "-" {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		w, report = f, nil
	}
	st, err := backup.Write(ctx, js, w)
	if err != nil {
		return err
	}
	if f, ok := w.(*os.File); ok && file != "-" {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	if report == nil {
		fmt.Fprintf(out, "backed up %d messages (sequences 1 to %d) to %s\n", st.Messages, st.LastSeq, file)
	} else {
		fmt.Fprintf(report, "backed up %d messages (sequences 1 to %d)\n", st.Messages, st.LastSeq)
	}
	return nil
}

func runRestore(ctx context.Context, out io.Writer, url, creds, file string) error {
	js, done, err := openJS(url, creds, "ledger-restore")
	if err != nil {
		return err
	}
	defer done()
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	st, err := backup.Restore(ctx, js, r)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "restored %d messages (sequences 1 to %d)\n", st.Messages, st.LastSeq)
	return nil
}
