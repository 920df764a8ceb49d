package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/internal/datadir"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// NATSConfigFile is the nats-server configuration `ledger nats init`
// writes beside the credentials.
const NATSConfigFile = "nats-auth.conf"

// NATSClusterFile is the nats-server cluster block `ledger nats init
// --routes` writes beside it (it holds the route password: 0600).
const NATSClusterFile = "nats-cluster.conf"

// natsInitLayout is what `ledger nats init` keeps or writes in --dir,
// checked as ledger dev checks its data directory (datadir.Check).
// nats-cluster.conf holds the route password, but an older release wrote
// it 0644 and init gives it 0600 again: it need only be this user's.
var natsInitLayout = datadir.Layout{
	Dirs: []string{devAuthDir, devSigningDir},
	Secrets: []string{filepath.Join(devAuthDir, "*.nk"), filepath.Join(devAuthDir, natsauth.RouteFile),
		filepath.Join(devSigningDir, signing.PrivateKeyFile)},
	Owned: []string{filepath.Join(devSigningDir, signing.TrustedKeysFile), NATSConfigFile, NATSClusterFile},
}

// natsInitFlags are the options of `ledger nats init`.
type natsInitFlags struct {
	dir         string
	routes      []string
	clusterName string
	routeListen string
	projector   natsauth.Layout
}

func init() {
	natsCmd := &cobra.Command{Use: "nats", Short: "Set up a standalone NATS for the ledger (what `ledger dev` does for its embedded one)"}

	var f natsInitFlags
	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Create the NATS identities, the signing key and a nats-server configuration in --dir",
		Long: `init creates, in --dir (0700), what a standalone deployment needs:

  DIR/nats-auth/{admin,ledger,projector,auditor}.nk   nkey seeds (0600), one per identity
  DIR/signing/ledger.key                              the ledger's Ed25519 signing key (0600)
  DIR/signing/trusted.pub                             the public keys the projector trusts
  DIR/nats-auth.conf                                  nats-server authorization for the identities

With --routes (a NATS cluster, e.g. the three servers of docker-compose.yml):

  DIR/nats-auth/route.secret                          the routes' user and password (0600)
  DIR/nats-cluster.conf                               the cluster block: name, listener, and the
                                                      authenticated routes to every server (0600)

Start nats-server with -c DIR/nats-auth.conf (plus -js): it then refuses
anonymous connections and gives each identity only its rights; a cluster
member's configuration includes nats-cluster.conf too, and each server
gets its own --name. Existing keys and the route password are kept; the
configuration is rewritten from them. DIR, what it holds and the
directories above it must be such that no other user could have put a
seed or key there (as ledger dev's --data): init refuses them otherwise,
naming the path.

The projector identity may manage only the durable consumers named
--projector-name (the projector's --name) and its partitions
NAME-p<k>of<n> for n up to --max-partitions: to run more partitions, or
under another name, write the configuration again with them and reload
nats-server (README: NATS identities).`,
		Example: `  ledger nats init --dir /secrets
  ledger nats init --dir /secrets --routes nats-1:6222,nats-2:6222,nats-3:6222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runNATSInit(cmd.OutOrStdout(), f) },
	}
	initCmd.Flags().StringVar(&f.dir, "dir", "./.ledger", "`DIR` for the credentials, keys and configuration")
	initCmd.Flags().StringSliceVar(&f.routes, "routes", nil,
		"`HOST:PORT` of every NATS cluster member's route listener (comma-separated); writes "+NATSClusterFile+" with authenticated routes")
	initCmd.Flags().StringVar(&f.clusterName, "cluster-name", "ledger", "NATS cluster `NAME` (with --routes)")
	initCmd.Flags().StringVar(&f.routeListen, "route-listen", "0.0.0.0:6222", "`ADDR` (host:port) where each server listens for the other members' routes (with --routes)")
	initCmd.Flags().StringVar(&f.projector.Name, "projector-name", natsauth.DefaultLayout.Name, "the projectors' --name `NAME`: the durable consumers the projector identity may manage are named after it")
	initCmd.Flags().IntVar(&f.projector.MaxPartitions, "max-partitions", natsauth.DefaultLayout.MaxPartitions, "the largest projector --partitions the projector identity may run")

	var url, creds string
	var window time.Duration
	var replicas, partitions int
	setupCmd := &cobra.Command{
		Use:   "setup",
		Short: "Create the LEDGER stream, or set its duplicate window and replicas (admin identity)",
		Long: `setup creates the LEDGER stream (file storage, kept forever, deletes and
purges denied, atomic batches and direct gets allowed) when it is missing,
or gives an existing one what this release needs (direct gets: every
reader reads with them and holds no consumer), and sets its
duplicate window: how long JetStream recognises a retried event id and
stores it once. A retry that comes later is stored, and the projector refuses
it (duplicate_id). --replicas is how many servers of a NATS cluster keep a
copy of the log (an append is acknowledged once a majority stored it; 3
survives the loss of one server); more than the cluster has servers is
refused. Given for an existing stream, it scales the stream to that many
replicas; omitted, an existing stream keeps its own. The stream stores each
event with its pool's partition, one of --partitions (NATS's partition()
mapping of the pool's name), so that a projector with n partitions reads
only its own events when n divides that count; the count is fixed when the
stream is made. A stream made by an older release is given its partitions
(the migration): the events it holds keep their subjects and are read by
every partition, the events after are stored with theirs; restart the
projectors after it so that they read only theirs. Only the admin identity
may do this; the ledger, the projector and the auditors cannot create,
change, purge or delete the stream.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
			defer cancel()
			// Out of range, these were taken as "leave it" while the
			// answer said the window was set to them.
			if window <= 0 {
				return fmt.Errorf("--duplicate-window %v: want a positive duration", window)
			}
			set := stream.Settings{Window: window}
			if cmd.Flags().Changed("replicas") {
				if replicas < 1 {
					return fmt.Errorf("--replicas %d: want 1 or more", replicas)
				}
				set.Replicas = replicas
			}
			if cmd.Flags().Changed("partitions") {
				// 0 was taken as "the default" (48) and a negative
				// count was refused only once NATS answered.
				if partitions < 1 || partitions > stream.MaxPartitions {
					return fmt.Errorf("--partitions %d: want 1 to %d", partitions, stream.MaxPartitions)
				}
				set.Partitions = partitions
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
	setupCmd.Flags().IntVar(&partitions, "partitions", stream.DefaultPartitions,
		fmt.Sprintf("partitions of the stored subjects (1 to %d), fixed when the stream is made: choose a multiple of every projector --partitions to be run", stream.MaxPartitions))
	var inboxCreds string
	inboxCmd := &cobra.Command{
		Use:   "inbox",
		Short: "Print the inbox prefix of a NATS identity (for the nats CLI's --inbox-prefix)",
		Long: `inbox prints the inbox prefix of the identity in --nats-creds: _INBOX.<its
public key>. Every identity but admin may receive replies only there, so
another NATS client using the seed (the nats CLI) must be given it:

  nats --nkey "$LEDGER_NATS_CREDS" --inbox-prefix "$(ledger nats inbox)" stream info LEDGER`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			prefix, err := natsauth.SeedInbox(inboxCreds)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), prefix)
			return nil
		},
	}
	addNATSCredsFlag(inboxCmd, &inboxCreds)
	natsCmd.AddCommand(initCmd, setupCmd, inboxCmd)
	root.AddCommand(natsCmd)
}

func runNATSInit(out io.Writer, flags natsInitFlags) error {
	dir := flags.dir
	cluster := natsauth.Cluster{Name: flags.clusterName, Listen: flags.routeListen, Routes: flags.routes}
	if len(flags.routes) > 0 {
		// Bad routes are refused before anything is written.
		if err := cluster.Validate(); err != nil {
			return err
		}
	}
	if err := flags.projector.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// What init keeps (seeds, the signing key, the route password) and
	// what it writes over (the configurations) must be this user's alone,
	// as ledger dev's data directory: a --dir another user could write
	// would let them put their own admin seed or signing key there for
	// init to keep and authorize, or a link where init writes (decision 495).
	if err := datadir.Check(dir, natsInitLayout); err != nil {
		return fmt.Errorf("--dir %s: %w", dir, err)
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
	if err := natsauth.WriteServerConfig(f, keys, flags.projector); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %s, %s/*.nk and %s/\nstart: nats-server -js -c %s\n", path, filepath.Join(dir, devAuthDir), filepath.Join(dir, devSigningDir), path)
	if len(flags.routes) == 0 {
		return nil
	}
	return writeClusterConfig(out, dir, cluster)
}

// writeClusterConfig writes DIR/nats-cluster.conf from the route
// credentials (created once, kept after: a restarted member still joins).
func writeClusterConfig(out io.Writer, dir string, c natsauth.Cluster) error {
	route, err := natsauth.InitRoute(filepath.Join(dir, devAuthDir))
	if err != nil {
		return err
	}
	var b strings.Builder
	if err := natsauth.WriteClusterConfig(&b, c, route); err != nil {
		return err
	}
	path := filepath.Join(dir, NATSClusterFile)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(path, 0o600); err != nil { // an older file kept its mode
		return err
	}
	fmt.Fprintf(out, "wrote %s (cluster %s, %d routes): include it in each member's configuration\n", path, c.Name, len(c.Routes))
	return nil
}
