package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cluster-ledger/ledger/internal/redact"
)

// Files pgcluster keeps in the data directory, beside PostgreSQL's own.
const (
	// PortFile remembers the port of the last start.
	PortFile = "pgcluster.port"
	// LogFile is the server log (pg_ctl -l).
	LogFile = "pgcluster.log"
)

// Superuser is the cluster's superuser, created by initdb with a
// generated password (SuperuserPasswordFile in the auth directory); every connection needs a
// password (scram-sha-256), local or TCP, and the server listens on
// 127.0.0.1 only.
const Superuser = "postgres"

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	binDir     string
	dataDir    string
	sockDir    string
	ownSockDir bool
	port       int
	database   string
	reused     bool
	cred       *credential
	log        io.Writer
	authDir    string            // the roles' password files
	roles      []string          // login roles besides the application role
	superPW    string            // "" until a cluster from before passwords is secured
	passwords  map[string]string // role -> password: AppRole and roles
	policies   map[string]RolePolicy
	setupSQL   string

	mu      sync.Mutex
	stopped bool
}

// Start starts (or reuses) the cluster in the data directory given with
// WithDataDir and returns once it accepts connections and the database
// exists. See the package documentation for what happens as root.
func Start(ctx context.Context, opts ...Option) (*Cluster, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.dataDir == "" {
		return nil, &Error{Kind: ErrNoDataDir}
	}
	if cfg.startTimeout > 0 {
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.startTimeout)
			defer cancel()
		}
	}
	dataDir, err := filepath.Abs(cfg.dataDir)
	if err != nil {
		return nil, newErr(ErrPrepare, err, "data directory %q", cfg.dataDir)
	}
	binDir, err := FindBinDir(ctx, cfg.binDir)
	if err != nil {
		return nil, err
	}
	authDir := cfg.authDir
	if authDir == "" {
		authDir = dataDir + ".auth"
	}
	if authDir, err = filepath.Abs(authDir); err != nil {
		return nil, newErr(ErrPrepare, err, "auth directory %q", cfg.authDir)
	}
	c := &Cluster{binDir: binDir, dataDir: dataDir, authDir: authDir, database: cfg.database, log: cfg.log,
		roles: cfg.roles, passwords: map[string]string{}, policies: cfg.policies, setupSQL: cfg.setupSQL}
	if err := checkPolicies(cfg.policies); err != nil {
		return nil, newErr(ErrPrepare, err, "role policies")
	}
	fmt.Fprintf(c.log, "pgcluster: PostgreSQL binaries in %s, data in %s, passwords in %s\n", binDir, dataDir, authDir)
	if needUnprivileged() {
		if c.cred, err = systemUser(c.log); err != nil {
			return nil, newErr(ErrPrepare, err, "the user to run PostgreSQL as")
		}
		fmt.Fprintf(c.log, "pgcluster: running as root; PostgreSQL will run as %s\n", c.cred)
	}
	if err := c.prepareAuthDir(); err != nil {
		return nil, err
	}
	if err := c.prepareDataDir(); err != nil {
		return nil, err
	}

	initialised := fileExists(filepath.Join(dataDir, "PG_VERSION"))
	legacy := false
	if initialised {
		if c.superPW, err = c.readPassword(Superuser); err != nil {
			return nil, err
		}
		if legacy, err = c.adoptLegacyPasswords(); err != nil {
			return nil, err
		}
	}
	if initialised {
		if port, pid, ok := c.runningServer(ctx); ok {
			c.port = port
			err := c.waitReady(ctx, pid)
			switch {
			case err == nil:
				c.reused = true
				fmt.Fprintf(c.log, "pgcluster: reusing the server already running on port %d (pid %d)\n", port, pid)
				if err := c.secure(ctx); err != nil {
					return nil, err
				}
				if legacy {
					if err := c.rotateLegacyPasswords(ctx); err != nil {
						return nil, err
					}
				}
				if err := c.ensureDatabase(ctx); err != nil {
					return nil, err
				}
				return c, nil
			case errors.Is(err, errServerGone):
				// Killed, not yet reaped: postgres would take the zombie
				// for a live postmaster, so wait until it is gone.
				fmt.Fprintf(c.log, "pgcluster: the server of a previous run (pid %d) is dead; starting a new one\n", pid)
				waitGone(ctx, pid)
			default:
				return nil, newErr(ErrStart, err, "server from %s reported running on port %d but does not answer", dataDir, port)
			}
		}
	} else if err := c.initdb(ctx, cfg.fsync, cfg.superPW); err != nil {
		return nil, err
	}

	if err := c.makeSocketDir(); err != nil {
		return nil, err
	}
	if err := c.startServer(ctx, cfg); err != nil {
		c.removeSocketDir()
		return nil, err
	}
	if err := c.waitReady(ctx, 0); err != nil {
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, newErr(ErrStart, err, "server on port %d does not accept connections", c.port)
	}
	if err := c.secure(ctx); err != nil {
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	if legacy {
		if err := c.rotateLegacyPasswords(ctx); err != nil {
			_ = c.Stop(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	if err := c.ensureDatabase(ctx); err != nil {
		_ = c.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return c, nil
}

// URL is the connection URL of the database as the application role,
// with its password: postgres://ledger:PASSWORD@127.0.0.1:PORT/ledger?sslmode=disable.
// The role owns the database and is not a superuser.
func (c *Cluster) URL() string { return c.URLAs(AppRole) }

// URLAs is the connection URL of the database as role (the application
// role or one given to WithRoles), with its password; "" for a role the
// cluster does not know.
func (c *Cluster) URLAs(role string) string {
	pw, ok := c.passwords[role]
	if !ok {
		return ""
	}
	return c.urlAs(role, pw, c.database)
}

// AuthDir is the directory of the roles' password files.
func (c *Cluster) AuthDir() string { return c.authDir }

// URLFor is the superuser's connection URL of a database of the cluster,
// with the password (administration: creating databases, tests).
func (c *Cluster) URLFor(database string) string { return c.urlAs(Superuser, c.superPW, database) }

// Port is the TCP port the server listens on at 127.0.0.1.
func (c *Cluster) Port() int { return c.port }

// Reused reports whether Start found the server already running from the
// data directory and reused it instead of starting one.
func (c *Cluster) Reused() bool { return c.reused }

// Stop shuts the server down (pg_ctl stop -m fast) and waits for it.
// Stopping a stopped cluster is a no-op.
func (c *Cluster) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil
	}
	out, err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir, "-m", "fast", "-w", "-t", strconv.Itoa(timeoutSeconds(ctx, 60)))
	if err != nil && c.serverAlive() {
		return &Error{Kind: ErrStop, Detail: "pg_ctl stop -D " + c.dataDir, Output: out, Err: err}
	}
	c.stopped = true
	c.removeSocketDir()
	fmt.Fprintf(c.log, "pgcluster: stopped the server on port %d\n", c.port)
	return nil
}

// prepareDataDir creates the data directory (0700; its missing parents
// 0755, so PostgreSQL's user may pass) and, as root, checks that
// PostgreSQL's user can reach it and gives it to that user. The modes of
// directories that existed are never changed: one PostgreSQL's user may
// not enter is an error naming it.
func (c *Cluster) prepareDataDir() error {
	if err := c.checkTrusted(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.dataDir), 0o755); err != nil {
		return newErr(ErrPrepare, err, "create the parent of the data directory")
	}
	if err := c.cred.checkReachable(c.dataDir); err != nil {
		return newErr(ErrPrepare, err, "data directory %s", c.dataDir)
	}
	if err := os.Mkdir(c.dataDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return newErr(ErrPrepare, err, "create data directory")
	}
	// initdb and postgres insist on 0700 (or 0750).
	if fi, err := os.Stat(c.dataDir); err == nil && fi.Mode().Perm()&0o027 != 0 {
		if err := os.Chmod(c.dataDir, 0o700); err != nil {
			return newErr(ErrPrepare, err, "chmod 0700 %s", c.dataDir)
		}
	}
	if err := c.cred.chownAll(c.dataDir); err != nil {
		return newErr(ErrPrepare, err, "chown -R %s to %s", c.dataDir, c.cred)
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context, fsync bool, pw string) error {
	if pw == "" {
		pw = newPassword()
	}
	pwPath, done, err := c.pwFile(pw)
	if err != nil {
		return err
	}
	defer done()
	// initdb writes into a directory of its own beside the data
	// directory, renamed onto it once initdb has finished and the
	// superuser's password file is written. A start killed meanwhile
	// (its initdb, orphaned, may even finish, with a password nobody
	// kept) leaves the data directory empty, and the next start
	// initialises it again; written in place, it left a cluster whose
	// superuser's password was lost, and every later start waited for
	// it forever (decision 399).
	tmp, err := c.initDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone once renamed; what a failure left
	args := []string{"-D", tmp, "-U", Superuser, "--auth=scram-sha-256", "--pwfile=" + pwPath, "-E", "UTF8", "--locale=C"}
	if !fsync {
		args = append(args, "--no-sync")
	}
	fmt.Fprintf(c.log, "pgcluster: initdb %s\n", strings.Join(args, " "))
	out, err := c.run(ctx, "initdb", args...)
	if err != nil {
		return &Error{Kind: ErrInitdb, Detail: "initdb -D " + tmp, Output: out, Err: err}
	}
	if err := c.writePassword(Superuser, pw); err != nil {
		return err
	}
	// The data directory is empty (prepareDataDir made it, no
	// PG_VERSION): removed (os.Remove takes only an empty one) and
	// replaced. A crash between the two leaves no data directory, which
	// the next start makes again.
	if err := os.Remove(c.dataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return newErr(ErrInitdb, err, "make room for the new cluster at %s", c.dataDir)
	}
	if err := os.Rename(tmp, c.dataDir); err != nil {
		return newErr(ErrInitdb, err, "move the new cluster from %s to %s", tmp, c.dataDir)
	}
	c.superPW = pw
	return nil
}

// initDirPattern names the directories initdb writes into beside the
// data directory (os.MkdirTemp's pattern).
func (c *Cluster) initDirPattern() string { return filepath.Base(c.dataDir) + ".initdb-*" }

// initDir removes what earlier starts killed during initdb left beside
// the data directory and makes a new directory for initdb there, with
// the data directory's owner and mode.
func (c *Cluster) initDir() (string, error) {
	parent := filepath.Dir(c.dataDir)
	stale, _ := filepath.Glob(filepath.Join(parent, c.initDirPattern()))
	for _, dir := range stale {
		if err := os.RemoveAll(dir); err != nil {
			return "", newErr(ErrPrepare, err, "remove %s, left by a start killed during initdb", dir)
		}
	}
	dir, err := os.MkdirTemp(parent, c.initDirPattern())
	if err != nil {
		return "", newErr(ErrPrepare, err, "create a directory for initdb beside %s", c.dataDir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", newErr(ErrPrepare, err, "chmod 0700 %s", dir)
	}
	if err := c.cred.chownAll(dir); err != nil {
		os.RemoveAll(dir)
		return "", newErr(ErrPrepare, err, "chown -R %s to %s", dir, c.cred)
	}
	return dir, nil
}

func (c *Cluster) makeSocketDir() error {
	dir, err := os.MkdirTemp("", "pgcluster-sock-")
	if err != nil {
		return newErr(ErrPrepare, err, "create socket directory")
	}
	c.sockDir, c.ownSockDir = dir, true
	if c.cred != nil {
		if err := c.cred.chownAll(dir); err != nil {
			c.removeSocketDir()
			return newErr(ErrPrepare, err, "chown %s to %s", dir, c.cred)
		}
	}
	return nil
}

func (c *Cluster) removeSocketDir() {
	if c.ownSockDir && c.sockDir != "" {
		_ = os.RemoveAll(c.sockDir)
		c.ownSockDir = false
	}
}

// startServer runs pg_ctl start, retrying on another free port when a port
// it picked itself was taken in the meantime, and waiting (up to 10s) for
// the processes of a crashed server to go away when their shared memory
// or lock file is still in use.
func (c *Cluster) startServer(ctx context.Context, cfg config) error {
	port, picked, err := c.choosePort(cfg.port)
	if err != nil {
		return err
	}
	portRetries, leftoverRetries := 0, 0
	for {
		c.port = port
		err := c.pgCtlStart(ctx, cfg.fsync)
		if err == nil {
			return c.writePortFile()
		}
		var e *Error
		if !errors.As(err, &e) {
			return err
		}
		switch {
		case picked && portRetries < 3 && strings.Contains(e.Output, "could not bind"):
			portRetries++
			fmt.Fprintf(c.log, "pgcluster: port %d was taken, trying another\n", port)
			if port, err = freePort(); err != nil {
				return err
			}
		case leftoverRetries < 40 && (strings.Contains(e.Output, "pre-existing shared memory block") ||
			strings.Contains(e.Output, "Is another postmaster")):
			leftoverRetries++
			if leftoverRetries == 1 {
				fmt.Fprintf(c.log, "pgcluster: processes of a previous server are still exiting; waiting\n")
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(250 * time.Millisecond):
			}
		default:
			return err
		}
	}
}

func (c *Cluster) pgCtlStart(ctx context.Context, fsync bool) error {
	logPath := filepath.Join(c.dataDir, LogFile)
	var logOffset int64
	if fi, err := os.Stat(logPath); err == nil {
		logOffset = fi.Size()
	}
	onOff := map[bool]string{true: "on", false: "off"}[fsync]
	serverOpts := []string{
		"-p", strconv.Itoa(c.port),
		"-k", shellQuote(c.sockDir),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_permissions=0700", // the directory is 0700 too
		"-c", "fsync=" + onOff,
		// The connections the role policies are checked against, and
		// large objects only for their owners, whatever a configuration
		// file says.
		"-c", "max_connections=" + strconv.Itoa(MaxConnections),
		"-c", "superuser_reserved_connections=" + strconv.Itoa(SuperuserReservedConnections),
		"-c", "lo_compat_privileges=off",
		// A connection that never finishes its password exchange holds
		// a slot of max_connections until then (decision 462).
		"-c", "authentication_timeout=" + strconv.Itoa(int(AuthenticationTimeout/time.Second)) + "s",
	}
	if !fsync {
		// Not synchronous_commit=off: that would lose the last commits
		// when the server process (not the machine) crashes.
		serverOpts = append(serverOpts, "-c", "full_page_writes=off")
	}
	fmt.Fprintf(c.log, "pgcluster: pg_ctl start on 127.0.0.1:%d (fsync=%s, log %s)\n", c.port, onOff, logPath)
	out, err := c.run(ctx, "pg_ctl", "start", "-w",
		"-t", strconv.Itoa(timeoutSeconds(ctx, 60)),
		"-D", c.dataDir, "-l", logPath, "-o", strings.Join(serverOpts, " "))
	if err != nil {
		return &Error{
			Kind:   ErrStart,
			Detail: fmt.Sprintf("pg_ctl start -D %s on port %d", c.dataDir, c.port),
			Output: out + "\n--- server log ---\n" + tailFrom(logPath, logOffset, 4096),
			Err:    err,
		}
	}
	return nil
}

// choosePort returns the port to use and whether pgcluster picked it.
func (c *Cluster) choosePort(requested int) (port int, picked bool, err error) {
	if requested != 0 {
		return requested, false, nil
	}
	if b, err := os.ReadFile(filepath.Join(c.dataDir, PortFile)); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && p < 65536 && portFree(p) {
			return p, true, nil
		}
	}
	port, err = freePort()
	return port, true, err
}

func (c *Cluster) writePortFile() error {
	path := filepath.Join(c.dataDir, PortFile)
	if err := os.WriteFile(path, []byte(strconv.Itoa(c.port)+"\n"), 0o600); err != nil {
		return newErr(ErrPrepare, err, "write %s", path)
	}
	if err := c.cred.chownAll(path); err != nil {
		return newErr(ErrPrepare, err, "chown %s", path)
	}
	return nil
}

// runningServer reports whether a server from the data directory is
// running (pg_ctl status), its pid and port (postmaster.pid lines 1 and
// 4).
func (c *Cluster) runningServer(ctx context.Context) (port, pid int, ok bool) {
	if _, err := c.run(ctx, "pg_ctl", "status", "-D", c.dataDir); err != nil {
		return 0, 0, false // 3: not running (a stale postmaster.pid is pg_ctl start's business)
	}
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, 0, false
	}
	pid, err1 := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, err2 := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err1 != nil || err2 != nil || port <= 0 {
		return 0, 0, false
	}
	return port, pid, true
}

// serverAlive reports whether the postmaster named by postmaster.pid
// still runs (false when there is no such file or it is stale).
func (c *Cluster) serverAlive() bool {
	b, err := os.ReadFile(filepath.Join(c.dataDir, "postmaster.pid"))
	if err != nil {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	return err == nil && processAlive(pid)
}

// errServerGone: the server waited for died.
var errServerGone = errors.New("server process exited")

// waitReady pings the server until it answers or ctx ends. With pid > 0 it
// gives up with errServerGone as soon as that process is dead.
func (c *Cluster) waitReady(ctx context.Context, pid int) error {
	var last error
	for {
		if pid > 0 && !processAlive(pid) {
			return errServerGone
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(pctx, c.URLFor("postgres"))
		if err == nil {
			err = conn.Ping(pctx)
			conn.Close(pctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		if code := pgCode(err); code == "28P01" || code == "28000" {
			// The server runs and refuses the superuser's password: no
			// wait changes that.
			return fmt.Errorf("it refuses the password of %s in %s (was the cluster in %s made by another run?): %w",
				Superuser, filepath.Join(c.authDir, PasswordFile(Superuser)), c.dataDir, redact.Error(err, c.URLFor("postgres")))
		}
		last = err
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitGone waits (at most 30s) until pid has been reaped.
func waitGone(ctx context.Context, pid int) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !processGone(pid) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) ensureDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URLFor("postgres"))
	if err != nil {
		return newErr(ErrCreateDatabase, redact.Error(err, c.URLFor("postgres")), "connect as %s", Superuser)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, role := range c.managedRoles() {
		if err := c.ensureManagedRole(ctx, conn, role); err != nil {
			return err
		}
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", c.database).Scan(&exists); err != nil {
		return newErr(ErrCreateDatabase, err, "look up database %q", c.database)
	}
	if exists {
		if err := c.adoptObjects(ctx, conn); err != nil {
			return err
		}
	} else {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.database}.Sanitize()+" OWNER "+AppRole); err != nil {
			return newErr(ErrCreateDatabase, err, "CREATE DATABASE %q", c.database)
		}
		fmt.Fprintf(c.log, "pgcluster: created database %s owned by role %s\n", c.database, AppRole)
	}
	// The cluster's other databases are the superuser's: no other role
	// connects to them (PostgreSQL lets PUBLIC connect, and create
	// temporary tables, in postgres and template1).
	for _, db := range []string{"postgres", "template1"} {
		if db == c.database {
			continue
		}
		if _, err := conn.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+db+" FROM PUBLIC"); err != nil {
			return newErr(ErrCreateDatabase, err, "close database %s to other roles", db)
		}
	}
	return c.runSetupSQL(ctx)
}

// run runs a PostgreSQL program from the bin directory, as the
// unprivileged user when needed, and returns its combined output.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.binDir, name), args...)
	cmd.Dir = "/" // the caller's working directory may be closed to the unprivileged user
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	c.cred.apply(cmd)
	err := cmd.Run()
	return out.String(), err
}

// cleanEnv is what initdb, pg_ctl and the server they start get of the
// caller's environment: where programs are, the locale, the time zone
// and the temporary directory. PG* variables would change what they do;
// and the rest was the invoking shell's whole environment, the lines
// `ledger dev` prints among it once pasted (LEDGER_TOKEN, the admin
// token; DATABASE_URL, a role's password) and any other secret there,
// readable in /proc/PID/environ by PostgreSQL's own user for as long as
// the server ran.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH", name == "LANG", name == "LANGUAGE", name == "TZ", name == "TMPDIR", strings.HasPrefix(name, "LC_"):
			env = append(env, kv)
		}
	}
	return env
}

func timeoutSeconds(ctx context.Context, def int) int {
	if dl, ok := ctx.Deadline(); ok {
		if s := int(time.Until(dl).Seconds()); s >= 1 {
			return s
		}
		return 1
	}
	return def
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, newErr(ErrStart, err, "find a free port")
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailFrom returns at most max bytes of the end of path after offset.
func tailFrom(path string, offset int64, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	if fi.Size()-offset > max {
		offset = fi.Size() - max
	}
	if offset < 0 || offset > fi.Size() {
		offset = 0
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, offset, fi.Size()-offset))
	return string(b)
}

// pgCode is the SQLSTATE of a server's error, "" for any other error.
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
