package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/internal/redact"
)

type publishFlags struct {
	ledgerURL, token, pool, file, typ, data, id string
	timeout                                     time.Duration
}

func init() {
	var f publishFlags
	cmd := &cobra.Command{
		Use:   "publish --pool POOL (--file FILE | --type TYPE --data JSON)",
		Short: "Send events to the ledger from the command line or a file",
		Long: `publish sends events through the ledger's HTTP API and prints, for each, its
sequence in the log and its id (and "duplicate" when the ledger already had
it). An event is {"id": ..., "type": ..., "data": {...}};
a file (or standard input with --file -) holds one event or a JSON array of
them, appended all or nothing.

A refused event (unknown consumer, release of more than is held, ...) exits
with status 1 and the ledger's reason. While the ledger answers 503 (NATS
unavailable) publish retries, with the same event ids, until --timeout;
when nothing listens at --ledger-url, when it is not an http:// or
https:// URL, or when the token holds a control character (a CR from a
file with CRLF line ends) it fails at once. When the events were sent
but no answer came within --timeout, they may or may not be stored:
publish exits 1 naming their ids (chosen at random when not given);
sent again with the same ids (--id, or in the file), each is stored once.

Requests carry the bearer token of LEDGER_TOKEN (or --ledger-token); the
ledger records the token's name as the events' producer.`,
		Example: `  ledger publish --pool demo --type demand --data '{"demands":{"/A":4}}'
  ledger publish --pool demo --file events.json
  jq -c '.events' batch.json | ledger publish --pool demo --file -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPublish(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f)
		},
	}
	addLedgerURLFlag(cmd, &f.ledgerURL)
	addLedgerTokenFlag(cmd, &f.token)
	cmd.Flags().StringVar(&f.pool, "pool", "", "`POOL` to append to (required)")
	cmd.Flags().StringVar(&f.file, "file", "", "JSON `FILE` with one event or an array of events (\"-\": standard input)")
	cmd.Flags().StringVar(&f.typ, "type", "", "event `TYPE`: demand, release, plan, host_up, host_down")
	cmd.Flags().StringVar(&f.data, "data", "", "event payload as `JSON` (with --type)")
	cmd.Flags().StringVar(&f.id, "id", "", "event `ID` (with --type; default: a random id)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "give up retrying after this long")
	_ = cmd.MarkFlagRequired("pool")
	root.AddCommand(cmd)
}

func runPublish(ctx context.Context, stdin io.Reader, out, errOut io.Writer, f publishFlags) error {
	if f.timeout <= 0 {
		return fmt.Errorf("--timeout %v: must be above 0 (how long publish retries while the ledger is unavailable; default 30s)", f.timeout)
	}
	evs, err := publishEvents(stdin, f)
	if err != nil {
		return err
	}
	// The ids are chosen here, not by the client library, so that a
	// publish that gets no answer can name them: the ledger may have
	// stored the events, and only the same ids sent again tell (each is
	// stored once). A new random id would store the event twice.
	for i := range evs {
		if evs[i].ID == "" {
			evs[i].ID = client.NewID()
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	res, err := client.New(f.ledgerURL, client.WithToken(f.token), client.FailFastWhenDown()).Append(ctx, f.pool, evs...)
	if client.IsRefused(err) {
		fmt.Fprintf(errOut, "ledger publish: refused: %v\n", err)
		return exitError{1}
	}
	if err != nil && !errors.Is(err, client.ErrNoLedger) && !errors.Is(err, client.ErrMisconfigured) {
		return unanswered(err, f, evs)
	}
	if err != nil {
		return err
	}
	for _, a := range res {
		dup := ""
		if a.Duplicate {
			dup = "\tduplicate"
		}
		fmt.Fprintf(out, "%d\t%s%s\n", a.Seq, a.ID, dup)
	}
	return nil
}

// unanswered is the error of a publish that sent its events and got no
// answer: it may or may not have stored them, so it names the ids to
// send them again with.
func unanswered(err error, f publishFlags, evs []client.Event) error {
	why := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		why = fmt.Sprintf("no answer from the ledger at %s within --timeout %v", redact.URL(f.ledgerURL), f.timeout)
	}
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	again := "send the same file again with these ids in it"
	if f.file == "" {
		again = fmt.Sprintf("publish again with --id %s", ids[0])
	}
	return fmt.Errorf("%s; the ledger may have stored the events or not: %s and each is stored once (ids: %s)", why, again, strings.Join(ids, ", "))
}

// publishEvents reads the events to send from the flags or the file.
func publishEvents(stdin io.Reader, f publishFlags) ([]client.Event, error) {
	var evs []client.Event
	switch {
	case f.file != "" && (f.typ != "" || f.data != "" || f.id != ""):
		return nil, errors.New("give either --file or --type/--data/--id, not both")
	case f.file != "":
		b, err := readFileOrStdin(f.file, stdin)
		if err != nil {
			return nil, err
		}
		if evs, err = parseEventFile(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.file, err)
		}
	case f.typ != "" && f.data != "":
		if !json.Valid([]byte(f.data)) {
			return nil, fmt.Errorf("--data %q is not JSON", f.data)
		}
		evs = []client.Event{{ID: f.id, Type: f.typ, Data: json.RawMessage(f.data)}}
	default:
		return nil, errors.New("nothing to send: give --file, or --type and --data")
	}
	return evs, nil
}

func readFileOrStdin(name string, stdin io.Reader) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(name)
}

// parseEventFile reads one event or an array of events, strictly (the
// ledger would refuse an unknown field; say so before sending).
func parseEventFile(b []byte) ([]client.Event, error) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '[' {
		b = append(append([]byte{'['}, b...), ']')
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var evs []client.Event
	if err := dec.Decode(&evs); err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, errors.New("no events")
	}
	return evs, nil
}
