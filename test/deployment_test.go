package test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/contract"
	"github.com/cluster-ledger/ledger/internal/natsauth"
	"github.com/cluster-ledger/ledger/internal/pgcluster"
	"github.com/cluster-ledger/ledger/internal/signing"
	"github.com/cluster-ledger/ledger/internal/testenv"
)

// deployment is a `ledger dev` on its own data directory, used as a site
// uses it: producers hold tokens of their own made with `ledger token add`
// (never the printed admin token), and the auditor's tools run with the
// identities dev prints.
type deployment struct {
	bin, data, httpAddr, natsAddr string
	args                          []string // more flags of ledger dev
	dev                           *devProcess
	// provisioner may append plans, hosts and demand to every pool (the
	// site's provisioning tool); reader may read every pool.
	provisioner, reader string
	client              *http.Client
}

// newDeployment makes the data directory with the site's tokens and
// starts `ledger dev` on it, with args.
func newDeployment(t *testing.T, args ...string) *deployment {
	t.Helper()
	d := &deployment{bin: ledgerBinary(t), data: testenv.DataDir(t), httpAddr: freeAddr(t), natsAddr: freeAddr(t), args: args,
		client: &http.Client{Transport: contract.ForTest(t).Transport(&http.Transport{MaxIdleConnsPerHost: 32}), Timeout: 30 * time.Second}}
	// As root, PostgreSQL's own user passes through the data directory to
	// its cluster in DATA/pg: others may enter it, not list it (what dev
	// makes when it creates the directory itself).
	if err := os.Mkdir(d.data, 0o711); err != nil {
		t.Fatal(err)
	}
	d.provisioner = d.addToken(t, "provisioner", "append,plan")
	d.reader = d.addToken(t, "reporting", "read")
	d.start(t)
	t.Cleanup(func() {
		if d.dev != nil {
			d.stop(t)
		}
	})
	return d
}

// addToken runs `ledger token add` on the data directory's tokens file
// (dev reads it at start).
func (d *deployment) addToken(t *testing.T, name, scopes string) string {
	t.Helper()
	out, err := exec.Command(d.bin, "token", "add", "--file", filepath.Join(d.data, "tokens.jsonl"), "--name", name, "--scopes", scopes, "--pools", "*").CombinedOutput()
	if err != nil {
		t.Fatalf("ledger token add: %v\n%s", err, out)
	}
	_, token, ok := strings.Cut(strings.TrimSpace(string(out)), "LEDGER_TOKEN=")
	if !ok {
		t.Fatalf("ledger token add printed no token:\n%s", out)
	}
	return token
}

func (d *deployment) start(t *testing.T) {
	t.Helper()
	d.dev = startDevEnv(t, d.bin, d.data, d.httpAddr, d.natsAddr, append(os.Environ(), "DATABASE_URL="+staleDatabaseURL), d.args...)
}

func (d *deployment) stop(t *testing.T) {
	t.Helper()
	d.dev.stop(t)
	d.dev = nil
}

// env is a variable dev printed, by the first of its names that it printed.
func (d *deployment) env(t *testing.T, names ...string) string {
	t.Helper()
	for _, n := range names {
		if v := d.dev.env[n]; v != "" {
			return v
		}
	}
	t.Fatalf("ledger dev printed none of %v", names)
	return ""
}

func (d *deployment) url() string { return "http://" + d.httpAddr }

// natsCreds is the auditor's seed file dev prints.
func (d *deployment) natsCreds(t *testing.T) string {
	return d.env(t, "LEDGER_NATS_CREDS", "NATS_CREDS")
}

// databaseURL is the reporting role's URL dev prints: read-only.
func (d *deployment) databaseURL(t *testing.T) string {
	return d.env(t, "DATABASE_URL")
}

// superuserURL is PostgreSQL's superuser: what someone who stole its
// password (DATA/pg-auth, the invoking user's only) could change the
// projection with.
func (d *deployment) superuserURL(t *testing.T) string {
	t.Helper()
	pw, err := os.ReadFile(filepath.Join(d.data, "pg-auth", pgcluster.SuperuserPasswordFile))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(d.databaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(pgcluster.Superuser, strings.TrimSpace(string(pw)))
	return u.String()
}

func (d *deployment) trustedKeys(t *testing.T) string {
	return d.env(t, "LEDGER_TRUSTED_KEYS")
}

// auditor connects to NATS and PostgreSQL as the printed auditor's
// identities and loads the trusted keys, as `ledger audit verify` does.
func (d *deployment) auditor(t *testing.T) (jetstream.JetStream, *pgxpool.Pool, *signing.Keyring) {
	t.Helper()
	nc, err := natsauth.Connect(d.env(t, "NATS_URL", "LEDGER_NATS_URL"), d.natsCreds(t), nats.Name("test-auditor"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.New(context.Background(), d.databaseURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	keys, err := signing.LoadKeyring(d.trustedKeys(t))
	if err != nil {
		t.Fatal(err)
	}
	return js, db, keys
}

// post sends a request body to path with token and returns the status
// and the answer.
func (d *deployment) post(token, path string, body []byte) (int, []byte, error) {
	rq, err := http.NewRequest(http.MethodPost, d.url()+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	rq.Header.Set("Content-Type", "application/json")
	rq.Header.Set("Authorization", "Bearer "+token)
	resp, err := d.client.Do(rq)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// get reads path with token into v (JSON).
func (d *deployment) get(token, path string, v any) error {
	rq, err := http.NewRequest(http.MethodGet, d.url()+path, nil)
	if err != nil {
		return err
	}
	rq.Header.Set("Authorization", "Bearer "+token)
	resp, err := d.client.Do(rq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

// appended is the API's answer to an append.
type appended struct {
	Events []struct {
		Seq       uint64 `json:"seq"`
		Duplicate bool   `json:"duplicate"`
	} `json:"events"`
}

// appendEvents posts events (JSON values) to pool as the provisioner and
// returns the sequence of the last one.
func (d *deployment) appendEvents(pool string, evs ...string) (uint64, error) {
	body := evs[0]
	if len(evs) > 1 {
		body = "[" + strings.Join(evs, ",") + "]"
	}
	// A 429 (the token's rate, --token-rate) is refused before anything is
	// appended: a producer waits as Retry-After says and sends again, as
	// the client library does.
	var code int
	var b []byte
	var err error
	for attempt := 0; ; attempt++ {
		code, b, err = d.post(d.provisioner, "/v1/pools/"+pool+"/events", []byte(body))
		if err != nil {
			return 0, err
		}
		if code != http.StatusTooManyRequests || attempt == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("append to %s: %d %s", pool, code, b)
	}
	var a appended
	if err := json.Unmarshal(b, &a); err != nil {
		return 0, fmt.Errorf("append to %s: %v: %s", pool, err, b)
	}
	var last uint64
	for _, r := range a.Events {
		last = max(last, r.Seq)
	}
	return last, nil
}

// projectedSeq is the pool's projected sequence as the API's allocations
// endpoint tells the reader (0 before its first event is projected).
func (d *deployment) projectedSeq(pool string) (uint64, error) {
	var a struct {
		Seq uint64 `json:"seq"`
	}
	err := d.get(d.reader, "/v1/pools/"+pool+"/allocations", &a)
	if err != nil && strings.Contains(err.Error(), ": 404 ") {
		return 0, nil
	}
	return a.Seq, err
}

// waitProjected waits until pool's projection reached seq and returns how
// long that took.
func (d *deployment) waitProjected(t *testing.T, pool string, seq uint64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got, err := d.projectedSeq(pool)
		if err == nil && got >= seq {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("pool %s not projected to %d within %s (at %d, %v)", pool, seq, within, got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitLog waits until dev logs a line containing what, and returns it.
func (d *deployment) waitLog(t *testing.T, what string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, l := range strings.Split(d.dev.stderr.String(), "\n") {
			if strings.Contains(l, what) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ledger dev did not log %q within %s:\n%s", what, within, d.dev.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
