package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// NATSConfigFile is the nats-server configuration `ledger nats init`
// writes beside the credentials.
const NATSConfigFile = "nats-auth.conf"

func init() {
	natsCmd := &cobra.Command{Use: "nats", Short: "Set up a standalone NATS for the ledger (what `ledger dev` does for its embedded one)"}

	var dir string
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the NATS identities, the signing key and a nats-server configuration in --dir",
		Long: `init creates, in --dir (0700), what a standalone deployment needs:

  DIR/nats-auth/{admin,ledger,projector,auditor}.nk   nkey seeds (0600), one per identity
  DIR/signing/ledger.key                              the ledger's Ed25519 signing key (0600)
  DIR/signing/trusted.pub                             the public keys the projector trusts
  DIR/nats-auth.conf                                  nats-server authorization for the identities

Start nats-server with -c DIR/nats-auth.conf (plus -js): it then refuses
anonymous connections and gives each identity only its rights. Existing
keys are kept; the configuration is rewritten from them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNATSInit(cmd.OutOrStdout(), dir) },
	}
	initCmd.Flags().StringVar(&dir, "dir", "./.ledger", "directory for the credentials, keys and configuration")

	var url, creds string
	var window time.Duration
	var replicas int
	setupCmd := &cobra.Command{
		Use:   "setup",
		Short: "Create the LEDGER stream, or set its duplicate window and replicas (admin identity)",
		Long: `setup creates the LEDGER stream (file storage, kept forever, deletes and
purges denied, atomic batches allowed) when it is missing, and sets its
duplicate window: how long JetStream recognises a retried event id and
stores it once. A retry that comes later is stored, and the projector refuses
it (duplicate_id). --replicas is how many servers of a NATS cluster keep a
copy of the log (an append is acknowledged once a majority stored it; 3
survives the loss of one server); more than the cluster has servers is
refused. Given for an existing stream, it scales the stream to that many
replicas; omitted, an existing stream keeps its own. Only the admin identity
may do this; the ledger, the projector and the auditors cannot create,
change, purge or delete the stream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			set := stream.Settings{Window: window}
			if cmd.Flags().Changed("replicas") {
				set.Replicas = replicas
			}
			if err := setupStream(ctx, url, creds, set); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stream %s ready (duplicate window %v)\n", stream.Name, window)
			return nil
		},
	}
	addNATSURLFlag(setupCmd, &url)
	addNATSCredsFlag(setupCmd, &creds)
	setupCmd.Flags().DurationVar(&window, "duplicate-window", stream.DuplicateWindow, "how long a retried event id is recognised and stored once")
	setupCmd.Flags().IntVar(&replicas, "replicas", 1,
		"copies of the stream, one per NATS server (1 to 5, at most the cluster's size); scales an existing stream only when given")
	natsCmd.AddCommand(initCmd, setupCmd)
	root.AddCommand(natsCmd)
}

func runNATSInit(out io.Writer, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keys, err := natsauth.Init(filepath.Join(dir, devAuthDir))
	if err != nil {
		return err
	}
	if _, err := signing.Init(filepath.Join(dir, devSigningDir)); err != nil {
		return err
	}
	path := filepath.Join(dir, NATSConfigFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644) // public keys only
	if err != nil {
		return err
	}
	if err := natsauth.WriteServerConfig(f, keys); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s, %s/*.nk and %s/\nstart: nats-server -js -c %s\n", path, filepath.Join(dir, devAuthDir), filepath.Join(dir, devSigningDir), path)
	return nil
}
