package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/cluster-ledger/ledger/internal/redact"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/stream"
	"github.com/cluster-ledger/ledger/migrations"
	"github.com/cluster-ledger/ledger/projections"
	"github.com/cluster-ledger/ledger/projections/query"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
)

// runRebuild projects the whole log into an empty database with the
// projector's own code (projections.WithUntil: read with direct gets, no
// consumer, so the auditor's identity may run it), up to the last
// sequence the stream held when it started.
func runRebuild(ctx context.Context, out io.Writer, f logFlags, into string) error {
	js, closeNATS, err := f.openLog()
	if err != nil {
		return err
	}
	defer closeNATS()
	if err := migrations.Up(ctx, into); err != nil {
		return fmt.Errorf("migrate %s: %w", redact.Conn(into), err)
	}
	db, err := bulkLoadPool(ctx, into)
	if err != nil {
		return redact.Error(err, into)
	}
	defer db.Close()
	held, err := query.HoldsProjection(ctx, db)
	if err != nil {
		return redact.Error(err, into)
	}
	name, err := unfinishedRebuild(ctx, db)
	if err != nil {
		return redact.Error(err, into)
	}
	switch {
	case name != "":
		fmt.Fprintf(out, "going on with the rebuild that stopped in %s (%s)\n", redact.Conn(into), name)
	case held:
		return fmt.Errorf("--into needs an empty database; %s already holds a projection", redact.Conn(into))
	default:
		name = fmt.Sprintf("%s%d", rebuildPrefix, time.Now().UnixNano())
	}
	last, err := stream.LastSeq(ctx, js.Conn())
	if err != nil {
		return err
	}
	start := time.Now()
	if err := dropSecondaryIndexes(ctx, db); err != nil {
		return err
	}
	keys, err := f.keyring(js)
	if err != nil {
		return err
	}
	if err := projectUntil(ctx, js, db, keys, name, last, f.development); err != nil {
		return err
	}
	if err := finishRebuild(ctx, db, name); err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	if err := haltedInRebuild(ctx, out, db); err != nil {
		return err
	}
	fmt.Fprintf(out, "rebuilt the projection of %d stream messages into %s in %.1fs (%.0f events/s)\n", last, redact.Conn(into), secs, float64(last)/secs)
	return refusedUnauthenticated(ctx, out, db)
}

// haltedInRebuild names the pools the rebuild's projector halted (a fold
// failed, or the log needs a version this build does not fold) and exits
// with status 1: their tables stop at that event, so the database is not
// the projection of the log, and a rebuild "done" with exit 0 would be
// taken for one (decision 421).
func haltedInRebuild(ctx context.Context, out io.Writer, db *pgxpool.Pool) error {
	halted, err := query.HaltedPools(ctx, db, 21)
	if err != nil || len(halted) == 0 {
		return err
	}
	lines := make([]string, len(halted))
	for i, h := range halted {
		lines[i] = fmt.Sprintf("pool %s, sequence %d: %s", h.Pool, h.Seq, h.Reason)
	}
	return listAndExit(out, "HALTED: the rebuild could not fold these pools; their tables stop before the sequence named, so the database is not a projection of the log:", lines, 1)
}

// refusedUnauthenticated reports the events of a projection refused as
// unauthenticated, with exit status 2 (as audit verify): a fold that
// refused events for want of a trusted signature has not rebuilt the
// ledger's allocations, whatever else it did.
func refusedUnauthenticated(ctx context.Context, out io.Writer, db *pgxpool.Pool) error {
	list, err := query.Unauthenticated(ctx, db, "", 0, 21)
	if err != nil || len(list) == 0 {
		return err
	}
	lines := make([]string, len(list))
	for i, r := range list {
		lines[i] = fmt.Sprintf("pool %s, sequence %d, id %q", r.Pool, r.Seq, r.ID)
	}
	return listAndExit(out, "UNAUTHENTICATED: events no trusted key signed were refused (they changed nothing); is --trusted-keys the keys that signed the log?", lines, 2)
}

// listAndExit prints header and the first 20 lines (the queries ask for
// 21, so a 21st says there are more) and exits with code.
func listAndExit(out io.Writer, header string, lines []string, code int) error {
	fmt.Fprintln(out, header)
	for i, l := range lines {
		if i == 20 {
			fmt.Fprintf(out, "  ...\n")
			break
		}
		fmt.Fprintf(out, "  %s\n", l)
	}
	return exitError{code}
}

func projectUntil(ctx context.Context, js jetstream.JetStream, db *pgxpool.Pool, keys *signing.Keyring, name string, last uint64, development bool) error {
	if last == 0 {
		return nil // an empty stream: nothing to project
	}
	done := make(chan error, 1)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := []projections.Option{projections.WithName(name), projections.WithLogger(quiet), projections.WithTrustedKeys(keys), projections.WithUntil(last)}
	if development {
		opts = append(opts, projections.WithDevelopmentRules())
	}
	go func() { done <- projections.New(js, db, opts...).Run(ctx) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			clearProgress()
			if err != nil {
				return fmt.Errorf("projector stopped: %w", err)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			return nil
		case <-tick.C:
			if seq, err := query.ProjectorOffset(ctx, db, name); err == nil {
				progress("rebuilding: %d of %d", seq, last)
			}
		}
	}
}

// A rebuild writes a database nobody reads until it is done, so it loads
// the way bulk loads do: without waiting for each commit's WAL flush (a
// crash means rebuilding again into an empty database) and with the
// secondary indexes built once at the end rather than row by row. The
// projector's code, and so the rows, are the same.

func bulkLoadPool(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	return pgxpool.NewWithConfig(ctx, cfg)
}

// dropSecondaryIndexes drops every index of the schema that backs no
// constraint and returns their definitions.
//
// A rebuild can stop anywhere (killed, the machine lost). Run again on the
// same database it goes on (decision 423): its projector's offset row,
// named rebuildPrefix and a number, is there until the rebuild is done,
// and the projector resumes from it as any projector does; the indexes it
// dropped are kept, by definition, in droppedIndexesTable, written in the
// transaction that drops them and removed in the one that builds them
// again, so a rebuild stopped between the two still builds them.

// rebuildPrefix begins the name of a rebuild's projector.
const rebuildPrefix = "rebuild-"

// droppedIndexesTable holds the definitions of the indexes a rebuild in
// progress dropped. It is the rebuild's alone (made and removed by the
// owner role that runs it; no other role reads it), so its SQL is here.
const droppedIndexesTable = "rebuild_dropped_indexes"

// unfinishedRebuild is the name of the projector of a rebuild that
// stopped in db ("" when there is none): the only offset row there,
// named as a rebuild's. One without the dropped indexes' definitions was
// left by an older release, which kept them in memory only: going on
// would leave those indexes out, so it is refused.
func unfinishedRebuild(ctx context.Context, db *pgxpool.Pool) (string, error) {
	rows, _ := db.Query(ctx, `SELECT name FROM projector_offsets`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("look for a rebuild that stopped: %w", err)
	}
	if len(names) != 1 || !strings.HasPrefix(names[0], rebuildPrefix) {
		return "", nil
	}
	var kept bool
	if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, droppedIndexesTable).Scan(&kept); err != nil {
		return "", fmt.Errorf("look for a rebuild that stopped: %w", err)
	}
	if !kept {
		return "", fmt.Errorf("--into: the database holds a rebuild an older release began and did not finish (%s); the indexes it dropped are not known: drop the database, create it empty and rebuild", names[0])
	}
	return names[0], nil
}

func dropSecondaryIndexes(ctx context.Context, db *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+droppedIndexesTable+` (definition text NOT NULL)`); err != nil {
			return fmt.Errorf("keep the indexes' definitions: %w", err)
		}
		indexes, err := query.SecondaryIndexes(ctx, tx)
		if err != nil {
			return err
		}
		for _, ix := range indexes {
			if _, err := tx.Exec(ctx, `INSERT INTO `+droppedIndexesTable+` (definition) VALUES ($1)`, ix.Definition); err != nil {
				return fmt.Errorf("keep the definition of index %s: %w", ix.Name, err)
			}
			if _, err := tx.Exec(ctx, "DROP INDEX "+pgx.Identifier{ix.Name}.Sanitize()); err != nil {
				return fmt.Errorf("drop index %s: %w", ix.Name, err)
			}
		}
		return nil
	})
}

// finishRebuild builds the dropped indexes again and removes the
// rebuild's own offset row, in one transaction: its pools keep their
// checkpoints, so projectors of any partitioning start on the rebuilt
// projection and skip what each pool folded (docs/decisions.md #79,
// #147); and a rebuild's offset row is never there without the
// definitions of the indexes it dropped.
func finishRebuild(ctx context.Context, db *pgxpool.Pool, name string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `SELECT definition FROM `+droppedIndexesTable)
		defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("read the dropped indexes' definitions: %w", err)
		}
		for _, def := range defs {
			if _, err := tx.Exec(ctx, def); err != nil {
				return fmt.Errorf("recreate index (%s): %w", def, err)
			}
		}
		if _, err := tx.Exec(ctx, `DROP TABLE `+droppedIndexesTable); err != nil {
			return fmt.Errorf("remove the dropped indexes' definitions: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM projector_offsets WHERE name = $1`, name); err != nil {
			return fmt.Errorf("remove the rebuild's offset: %w", err)
		}
		return nil
	})
}
