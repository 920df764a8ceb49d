package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/backup"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

func init() {
	var natsURL, natsCreds, trustedKeys, file string
	backupCmd := &cobra.Command{
		Use:   "backup",
		Short: "Copy the LEDGER stream to a file, with the signing keys in force (read rights are enough: the auditor identity)",
		Long: `backup writes every message of the LEDGER stream, in sequence order, to a
file of JSON lines (--out, "-" for stdout): a header naming the signing
public keys in force, by key id (the trusted keys of --trusted-keys, and
the keys of a log this deployment was itself restored from), then per
message its sequence, subject, event id, the ledger's signature and the
body. Restore it with 'ledger restore' into a fresh deployment: its
projectors trust the backup's keys for the restored events and fold them
by themselves. FILE appears only once the backup is whole (it is written as
FILE.partial-* beside it first), and never over an existing file.
backup says how many events each key signed, and names
events none signed (published around the ledger): a restore refuses
those unless told to take them.`,
		Example: `  ledger backup --out ledger-$(date +%F).jsonl`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBackup(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), natsURL, natsCreds, trustedKeys, file)
		},
	}
	addNATSURLFlag(backupCmd, &natsURL)
	addNATSCredsFlag(backupCmd, &natsCreds)
	addTrustedKeysFlag(backupCmd, &trustedKeys)
	backupCmd.Flags().StringVar(&file, "out", "", "`FILE` to write (\"-\": standard output)")
	_ = backupCmd.MarkFlagRequired("out")

	var rNATSURL, rNATSCreds, rKeys, in string
	var allowUnauthenticated, trustBackupKeys bool
	restoreCmd := &cobra.Command{
		Use:   "restore",
		Short: "Verify a backup's signatures and publish it into an empty LEDGER stream, each message at its original sequence (admin identity); run again, it goes on after an interrupted restore",
		Long: `restore reads a file written by 'ledger backup', verifies the signature of
every event with the keys the backup names, and only then publishes its
messages, in order, into the LEDGER stream of the server at --nats-url,
creating the stream when missing. The stream must be empty (a fresh
deployment), or hold the start of this same backup: a restore that
stopped (killed, a lost connection) is run again with the same command
and goes on after the last message restored, once each message there is
found equal to the backup's (another log there is refused, naming the
first sequence that differs). Every message must land at its original
sequence, with its signature, or restore stops and says where. Only the
admin identity may create the stream and publish these messages.

An event no key of the backup signed (edited after it was signed, or
unsigned) makes restore refuse the backup, naming its sequence, with
exit status 1 and nothing restored; --allow-unauthenticated restores such
events as they are (the projectors refuse them, as where the backup was
taken). Before the first message, restore records the backup's keys in
the stream (its metadata) as historical keys, trusted for the restored
sequences only: the new deployment's projectors, with keys of their own,
fold the restored log by themselves, and 'ledger audit verify' passes. It
prints the keys' ids. Whoever could write the backup file could edit
events, sign them again with a key of their own and name that key: so
restore needs --trusted-keys, the trusted keys file of the deployment the
backup comes from (kept apart from the backups), and refuses, with
nothing restored, a backup naming any key that file lacks; without that
file, --trust-backup-keys trusts the keys the backup names (restore says
which), and without either restore refuses. A backup of format 1 (before
keys) needs --trusted-keys: the keys that signed it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRestore(cmd.Context(), cmd.OutOrStdout(), rNATSURL, rNATSCreds, rKeys, in, backup.RestoreOptions{AllowUnauthenticated: allowUnauthenticated, TrustBackupKeys: trustBackupKeys})
		},
	}
	addNATSURLFlag(restoreCmd, &rNATSURL)
	addNATSCredsFlag(restoreCmd, &rNATSCreds)
	restoreCmd.Flags().StringVar(&rKeys, "trusted-keys", "", "the trusted keys `FILE` (PEM public keys) of the deployment the backup comes from: a backup naming another key is refused; a backup of format 1 (it names no keys) is verified with them")
	restoreCmd.Flags().StringVar(&in, "in", "", "backup `FILE` to restore (\"-\": standard input)")
	restoreCmd.Flags().BoolVar(&allowUnauthenticated, "allow-unauthenticated", false, "restore a backup holding events its keys did not sign, as they are (the projectors refuse them)")
	restoreCmd.Flags().BoolVar(&trustBackupKeys, "trust-backup-keys", false, "without --trusted-keys: verify the backup with the keys it names itself (whoever could write the backup could have re-signed it)")
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

func runBackup(ctx context.Context, out, errOut io.Writer, url, creds, trustedKeys, file string) error {
	if trustedKeys == "" {
		return fmt.Errorf("%w: backup needs the trusted keys (--trusted-keys or %s, which ledger dev prints): a new deployment trusts the backup by them", backup.ErrNoKeys, EnvTrustedKeys)
	}
	keys, err := signing.LoadKeyring(trustedKeys)
	if err != nil {
		return err
	}
	if file != "-" {
		if _, err := os.Lstat(file); err == nil {
			return fmt.Errorf("%s exists: backup never writes over a file", file)
		}
	}
	js, done, err := openJS(url, creds, "ledger-backup")
	if err != nil {
		return err
	}
	defer done()
	keys.UseHistory(stream.HistorySource(js))
	w, report := out, errOut
	var f *os.File
	if file != "-" {
		// Written beside FILE under a name of its own, and given FILE's
		// name once whole and synced: a backup that failed, or was
		// killed, midway never leaves a FILE that looks like a backup
		// (decision 494). CreateTemp's mode is 0600.
		if f, err = os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".partial-*"); err != nil {
			return err
		}
		defer func() { f.Close(); os.Remove(f.Name()) }()
		w, report = f, out
	}
	st, err := backup.Write(ctx, js, w, keys, func(seq, last uint64) {
		if seq%1000 == 0 || seq == last {
			progress("backed up %d of %d", seq, last)
		}
	})
	clearProgress()
	if err != nil {
		return err
	}
	if f != nil {
		if err := f.Sync(); err != nil {
			return err
		}
		if err := publishFile(f.Name(), file); err != nil {
			return err
		}
	}
	where := ""
	if f != nil {
		where = " to " + file
	}
	fmt.Fprintf(report, "backed up %d messages (sequences 1 to %d)%s with %d signing key(s): %s\n", st.Messages, st.LastSeq, where, len(st.Keys), keyUse(st))
	if n := len(st.Unauthenticated); n > 0 {
		u := st.Unauthenticated[0]
		fmt.Fprintf(errOut, "note: %d event(s) are signed by none of these keys (the first at sequence %d: %s); a restore refuses the backup unless --allow-unauthenticated\n", n, u.Seq, u.Reason)
	}
	return nil
}

// publishFile gives the whole, synced file tmp the name file, never
// replacing a file of that name (a link fails on one; a file system
// without links gets a rename after a last check), and syncs the
// directory so that the name survives a crash.
func publishFile(tmp, file string) error {
	if err := os.Link(tmp, file); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists: backup never writes over a file (the backup made is lost)", file)
		}
		if _, serr := os.Lstat(file); serr == nil {
			return fmt.Errorf("%s exists: backup never writes over a file (the backup made is lost)", file)
		}
		if err := os.Rename(tmp, file); err != nil {
			return err
		}
	}
	d, err := os.Open(filepath.Dir(file))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// keyUse names each key of a backup and how many events it signed.
func keyUse(st backup.Stats) string {
	var parts []string
	for _, k := range st.Keys {
		p := fmt.Sprintf("%s (%d events", k.ID, st.Signed[k.ID])
		if k.UpTo > 0 {
			p += fmt.Sprintf(", a restored log's key, up to sequence %d", k.UpTo)
		}
		parts = append(parts, p+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func runRestore(ctx context.Context, out io.Writer, url, creds, trustedKeys, file string, opts backup.RestoreOptions) error {
	if trustedKeys != "" {
		keys, err := signing.LoadKeyring(trustedKeys)
		if err != nil {
			return err
		}
		opts.Keys = keys
	}
	in, cleanup, err := seekableInput(file)
	if err != nil {
		return err
	}
	defer cleanup()
	js, done, err := openJS(url, creds, "ledger-restore")
	if err != nil {
		return err
	}
	defer done()
	opts.Progress = func(seq, last uint64) {
		if seq%1000 == 0 || seq == last {
			progress("restored %d of %d", seq, last)
		}
	}
	st, err := backup.Restore(ctx, js, in, opts)
	clearProgress()
	if err != nil {
		if errors.Is(err, backup.ErrKeysUnchecked) {
			return fmt.Errorf("%w (--trusted-keys FILE, or --trust-backup-keys)", err)
		}
		if errors.Is(err, backup.ErrUnauthenticated) {
			for _, u := range st.Unauthenticated {
				fmt.Fprintf(out, "UNAUTHENTICATED sequence %d (%s, id %q): %s\n", u.Seq, u.Subject, u.ID, u.Reason)
			}
		}
		return err
	}
	fmt.Fprintf(out, "verified %d events against the backup's key(s): %s\n", st.Messages, keyUse(st))
	for _, u := range st.Unauthenticated {
		fmt.Fprintf(out, "restored UNAUTHENTICATED (the projectors refuse it): sequence %d (%s, id %q): %s\n", u.Seq, u.Subject, u.ID, u.Reason)
	}
	if st.Resumed > 0 {
		fmt.Fprintf(out, "went on from an earlier restore: the stream held sequences 1 to %d, each as in the backup\n", st.Resumed)
	}
	fmt.Fprintf(out, "restored %d messages (sequences 1 to %d); the stream trusts the backup's keys for them: %s\n",
		st.Messages, st.LastSeq, strings.Join(backup.KeyIDs(st.Keys), ", "))
	return nil
}

// seekableInput opens the backup: a file, or standard input ("-")
// copied to a private temporary file, since restore reads it twice
// (verify everything, then publish).
func seekableInput(file string) (io.ReadSeeker, func(), error) {
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	tmp, err := os.CreateTemp("", "ledger-restore-*.jsonl") // mode 0600
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { tmp.Close(); os.Remove(tmp.Name()) }
	if _, err := io.Copy(tmp, os.Stdin); err != nil {
		cleanup()
		return nil, nil, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, err
	}
	return tmp, cleanup, nil
}
