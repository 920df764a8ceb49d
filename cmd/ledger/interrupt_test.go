package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestInterruptedCommandSaysSo: a command that SIGINT (Ctrl-C) or
// SIGTERM stops (its context ended, as main's signal context ends) says
// it was interrupted, in the ledger's words, with its own exit status.
// It printed the last call's failure before: "ledger: read events rows:
// timeout: context already done: context canceled" (audit verify, the
// PostgreSQL driver's words), "ledger: context canceled" (replay --into),
// as if something had gone wrong. Here each waits on a peer that accepts
// and never answers, and is interrupted.
func TestInterruptedCommandSaysSo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // silent
		}
	}()
	silent := ln.Addr().String()
	natsURL := testenv.NATS(t) // audit verify reads the log, then waits on a silent PostgreSQL
	creds := testenv.Creds(t, natsURL, natsauth.Auditor)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"status", "--ledger-url", "http://" + silent, "--ledger-token", "x", "--timeout", "1m"}, 1},
		{[]string{"audit", "verify", "--nats-url", natsURL, "--nats-creds", creds, "--trusted-keys", "", "--database-url", "postgres://u:secret@" + silent + "/db"}, exitNotVerified},
	} {
		cmd, _, err := root.Find(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Flags().VisitAll(func(f *pflag.Flag) { _ = f.Value.Set(f.DefValue); f.Changed = false })
		root.SetArgs(tc.args)
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		ctx, cancel := context.WithCancel(context.Background())
		// cobra keeps a command's context from an earlier execution
		// (another test's, ended since): this one's, as main's is.
		cmd.SetContext(ctx)
		time.AfterFunc(500*time.Millisecond, cancel)
		var stderr bytes.Buffer
		code := execute(ctx, &stderr)
		root.SetArgs(nil)
		root.SetOut(nil)
		root.SetErr(nil)
		cancel()
		want := "ledger " + strings.Join(commandPath(cmd), " ") + ": interrupted (SIGINT or SIGTERM) before it finished\n"
		if got := stderr.String(); got != want || code != tc.code {
			t.Errorf("%v interrupted: exit %d, %q; want exit %d, %q", tc.args, code, got, tc.code, want)
		}
	}
}

// commandPath is cmd's names below the root.
func commandPath(cmd *cobra.Command) []string {
	var names []string
	for c := cmd; c.HasParent(); c = c.Parent() {
		names = append([]string{c.Name()}, names...)
	}
	return names
}
