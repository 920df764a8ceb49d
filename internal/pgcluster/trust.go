package pgcluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrUntrusted: the data directory, or a file in it that decides who may
// connect or what the server runs, may have been put there or changed
// by someone else than pgcluster's user (or PostgreSQL's).
var ErrUntrusted = errors.New("data directory not trusted")

// checkTrusted refuses an existing data directory that another user
// owns or may write, and an initialised one whose configuration
// pgcluster did not write: a pg_hba.conf that lets anyone in without a
// password (trust, peer, ...), a postgresql.conf or postgresql.auto.conf
// setting what pgcluster never sets (shared_preload_libraries,
// archive_command, hba_file, include ... run programs, load code or move
// the configuration elsewhere). It runs before anything is started or
// given to PostgreSQL's user (decision #155).
func (c *Cluster) checkTrusted() error {
	fi, err := os.Lstat(c.dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return newErr(ErrPrepare, err, "data directory %s", c.dataDir)
	}
	if !fi.IsDir() {
		return untrusted(c.dataDir, "is not a directory (a symbolic link, or a file): it may point at someone else's cluster")
	}
	if err := c.ownedAndClosed(c.dataDir, fi); err != nil {
		return err
	}
	entries, err := os.ReadDir(c.dataDir)
	if err != nil {
		return newErr(ErrPrepare, err, "data directory %s", c.dataDir)
	}
	for _, e := range entries {
		path := filepath.Join(c.dataDir, e.Name())
		fi, err := os.Lstat(path)
		if err != nil {
			return newErr(ErrPrepare, err, "%s", path)
		}
		if err := c.ownedAndClosed(path, fi); err != nil {
			return err
		}
	}
	if !fileExists(filepath.Join(c.dataDir, "PG_VERSION")) {
		return nil
	}
	for _, name := range []string{"pg_hba.conf", "pg_ident.conf", "postgresql.conf", "postgresql.auto.conf"} {
		path := filepath.Join(c.dataDir, name)
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return newErr(ErrPrepare, err, "%s", path)
		}
		if !fi.Mode().IsRegular() {
			return untrusted(path, "is not a regular file: the server's configuration may come from somewhere else")
		}
	}
	// A cluster made before pgcluster used passwords has no superuser
	// password and trusts local connections: Start secures it (secure).
	// One with the password has pgcluster's rules, or someone else's.
	if pw, err := c.readPassword(Superuser); err != nil {
		return err
	} else if pw != "" {
		if err := checkHBA(filepath.Join(c.dataDir, "pg_hba.conf")); err != nil {
			return err
		}
	}
	for _, name := range []string{"postgresql.conf", "postgresql.auto.conf"} {
		if err := checkConf(filepath.Join(c.dataDir, name)); err != nil {
			return err
		}
	}
	return nil
}

func untrusted(path, reason string) error {
	return &Error{Kind: ErrUntrusted, Detail: path + " " + reason}
}

// ownedAndClosed refuses path unless pgcluster's user or PostgreSQL's
// owns it and neither group nor others may write it.
func (c *Cluster) ownedAndClosed(path string, fi fs.FileInfo) error {
	if uid, ok := ownerUID(fi); ok && !slices.Contains(c.cred.owners(), uid) {
		who := "you"
		if c.cred != nil {
			who = "you or " + SystemUser
		}
		return untrusted(path, fmt.Sprintf("is owned by uid %d, not by %s: another user could have put their own configuration or roles there; use a data directory of your own", uid, who))
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return untrusted(path, fmt.Sprintf("has mode %#o: group or others may write it; chmod go-w it (and check what it holds)", fi.Mode().Perm()))
	}
	return nil
}

// hbaMethods are the authentication methods pg_hba.conf may name: a
// password checked by SCRAM, or a refusal.
var hbaMethods = []string{"scram-sha-256", "reject"}

// otherMethods are the methods that let a client in some other way:
// without a password (trust), by its operating-system user (peer,
// ident), with a password sent in clear or hashed weakly (password,
// md5), or through a service pgcluster does not set up.
var otherMethods = []string{"trust", "peer", "ident", "password", "md5", "gss", "sspi", "pam", "ldap", "radius", "cert", "bsd"}

// checkHBA refuses a pg_hba.conf line that is not a scram-sha-256 (or
// reject) rule, or that takes names from another file (@file).
func checkHBA(path string) error {
	return eachLine(path, func(n int, line string) error {
		fields := strings.Fields(line)
		for _, f := range fields {
			if strings.HasPrefix(f, "@") || strings.HasPrefix(f, "include") {
				return untrusted(path, fmt.Sprintf("line %d reads %s from another file: pgcluster writes every rule here", n, f))
			}
			if slices.Contains(otherMethods, strings.ToLower(f)) {
				return untrusted(path, fmt.Sprintf("line %d lets clients in with method %s, not a password (scram-sha-256): "+
					"pgcluster never writes it, so someone else changed who may connect; remove the line", n, f))
			}
		}
		if !slices.ContainsFunc(fields, func(f string) bool { return slices.Contains(hbaMethods, strings.ToLower(f)) }) {
			return untrusted(path, fmt.Sprintf("line %d names no method pgcluster writes (scram-sha-256, reject): %q", n, line))
		}
		return nil
	})
}

// confSettings are the settings a configuration file of the cluster may
// hold: initdb's, tuning (memory, planner, WAL, checkpoints, autovacuum)
// and what the server logs. Anything else
// (loading libraries, running archive or restore commands, moving the
// configuration or the data, listening elsewhere, include directives) is
// refused, named: the server runs as PostgreSQL's user with the cluster
// in its hands.
var confSettings = []string{
	// initdb writes these
	"max_connections", "shared_buffers", "dynamic_shared_memory_type", "max_wal_size", "min_wal_size",
	"log_timezone", "datestyle", "timezone", "lc_messages", "lc_monetary", "lc_numeric", "lc_time",
	"default_text_search_config",
	// tuning of memory, the planner, the WAL and checkpoints (ALTER SYSTEM
	// writes postgresql.auto.conf; only a superuser may run it)
	"work_mem", "maintenance_work_mem", "effective_cache_size", "checkpoint_timeout",
	"checkpoint_completion_target", "checkpoint_flush_after", "wal_buffers", "wal_writer_delay",
	"wal_writer_flush_after", "wal_compression", "synchronous_commit", "commit_delay", "commit_siblings",
	"random_page_cost", "seq_page_cost", "effective_io_concurrency", "bgwriter_delay", "bgwriter_lru_maxpages",
	"bgwriter_lru_multiplier", "max_parallel_workers", "max_parallel_workers_per_gather", "max_worker_processes",
	"autovacuum", "autovacuum_naptime", "autovacuum_vacuum_scale_factor", "autovacuum_analyze_scale_factor",
	"autovacuum_vacuum_cost_limit", "autovacuum_max_workers",
	// what the server log says (not where it goes)
	"log_min_duration_statement", "log_checkpoints", "log_connections", "log_disconnections",
	"log_lock_waits", "log_statement", "log_line_prefix", "log_min_messages",
}

// checkConf refuses a setting of postgresql.conf or postgresql.auto.conf
// outside confSettings.
func checkConf(path string) error {
	return eachLine(path, func(n int, line string) error {
		name, _, _ := strings.Cut(line, "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if i := strings.IndexAny(name, " \t"); i >= 0 {
			name = name[:i] // "name value" without "="
		}
		if !slices.Contains(confSettings, name) {
			return untrusted(path, fmt.Sprintf("line %d sets %s, which pgcluster never sets and which could load code, run programs or move the configuration: "+
				"someone else may have changed the cluster; remove the line (ALTER SYSTEM RESET for postgresql.auto.conf)", n, name))
		}
		return nil
	})
}

// eachLine calls f with each line of path that is not blank or a
// comment (# to the end of the line outside quotes), numbered from 1.
// A missing file has no lines.
func eachLine(path string, f func(n int, line string) error) error {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return newErr(ErrPrepare, err, "%s", path)
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(stripComment(sc.Text()))
		if line == "" {
			continue
		}
		if err := f(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return newErr(ErrPrepare, err, "%s", path)
	}
	return nil
}

// stripComment cuts line at the first # outside single or double quotes.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#':
			return line[:i]
		}
	}
	return line
}
