package test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/internal/audit"
	"github.com/cluster-ledger/ledger/internal/signing"
)

// trafficPools is the plan of the pools the audit test appends to: six
// leaves under two parents, three hosts of 8 slots.
const trafficPlan = `{"type":"plan","data":{"plan":{"consumers":[
	{"path":"/a/x","priority":3},{"path":"/a/y","priority":2},{"path":"/a/z","priority":1},
	{"path":"/b/x","priority":2},{"path":"/b/y","priority":1},{"path":"/b/z","priority":1}]}}}`

var trafficLeaves = []string{"/a/x", "/a/y", "/a/z", "/b/x", "/b/y", "/b/z"}

// traffic appends random demand (and now and then a release) to pools as
// the provisioner until stop is closed; it returns how many events it
// appended and the first error.
func traffic(d *deployment, pools []string, workers int, stop <-chan struct{}) (wait func() (int64, error)) {
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 20))
			for {
				select {
				case <-stop:
					return
				default:
				}
				pool := pools[rng.IntN(len(pools))]
				var evs []string
				for range 1 + rng.IntN(4) {
					demands := []string{}
					for _, leaf := range trafficLeaves {
						if rng.IntN(2) == 0 {
							demands = append(demands, fmt.Sprintf("%q:%d", leaf, rng.IntN(12)))
						}
					}
					if len(demands) == 0 {
						demands = append(demands, fmt.Sprintf("%q:%d", trafficLeaves[0], rng.IntN(12)))
					}
					evs = append(evs, `{"type":"demand","data":{"demands":{`+strings.Join(demands, ",")+`}}}`)
				}
				if _, err := d.appendEvents(pool, evs...); err != nil {
					errs <- err
					return
				}
				n.Add(int64(len(evs)))
			}
		}()
	}
	return func() (int64, error) {
		wg.Wait()
		close(errs)
		return n.Load(), <-errs
	}
}

// TestAuditVerifyUnderTraffic runs `ledger audit verify` (the function
// and the command, with the auditor's identities `ledger dev` prints)
// hundreds of times while producers append to the pools it verifies and
// the projector writes: every run must say ok, naming the sequence it
// verified, and those sequences must move on (traffic really flowed
// between runs). Issue 20 saw 13 divergences in 15 runs.
func TestAuditVerifyUnderTraffic(t *testing.T) {
	d := newDeployment(t)
	pools := []string{"traffic-a", "traffic-b", "traffic-c", "traffic-d"}
	for _, p := range pools {
		if _, err := d.appendEvents(p, trafficPlan,
			`{"type":"host_up","data":{"host":"h1","slots":8}}`,
			`{"type":"host_up","data":{"host":"h2","slots":8}}`,
			`{"type":"host_up","data":{"host":"h3","slots":8}}`); err != nil {
			t.Fatal(err)
		}
	}
	// A quiet pool, with a reclaim, that the traffic leaves alone: the
	// tampering below changes its rows while the others move.
	quietSeq := quietPool(t, d)
	js, db, keys := d.auditor(t)
	stop := make(chan struct{})
	wait := traffic(d, pools, 3, stop)
	stopped := false
	defer func() {
		if !stopped {
			close(stop)
			_, _ = wait()
		}
	}()

	const runs = 200
	ctx := context.Background()
	var costs []time.Duration
	var events int
	seen := map[uint64]bool{}
	for i := range runs {
		pool := pools[i%len(pools)]
		if i%10 == 9 {
			pool = "" // every pool, now and then
		}
		start := time.Now()
		rep, err := audit.Verify(ctx, js, db, keys, 1, pool, nil)
		costs = append(costs, time.Since(start))
		if err != nil {
			var div *audit.Divergence
			if errors.As(err, &div) {
				t.Fatalf("run %d (pool %q) under traffic: a false DIVERGENCE\n%v", i, pool, div)
			}
			t.Fatalf("run %d (pool %q): %v", i, pool, err)
		}
		if rep.Events == 0 || rep.UpTo == 0 || len(rep.Unauthenticated) > 0 {
			t.Fatalf("run %d (pool %q): %+v", i, pool, rep)
		}
		events += rep.Events
		seen[rep.UpTo] = true
	}
	// The command, as the auditor runs it with the printed variables.
	env := append(os.Environ(), "NATS_URL="+d.env(t, "NATS_URL", "LEDGER_NATS_URL"), "NATS_CREDS="+d.natsCreds(t), "LEDGER_NATS_CREDS="+d.natsCreds(t),
		"DATABASE_URL="+d.databaseURL(t), "LEDGER_DATABASE_URL="+d.databaseURL(t), "LEDGER_TRUSTED_KEYS="+d.trustedKeys(t))
	for i := range 10 {
		args := []string{"audit", "verify"}
		if i%2 == 0 {
			args = append(args, "--pool", pools[i%len(pools)])
		}
		cmd := exec.Command(d.bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "ok: ") || !strings.Contains(string(out), "up to sequence ") {
			t.Fatalf("ledger %s under traffic: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	testTamperingUnderTraffic(t, d, js, db, keys, quietSeq)
	close(stop)
	stopped = true
	appended, err := wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < runs/3 {
		t.Fatalf("%d runs verified only %d distinct sequences: the traffic did not flow during the runs", runs, len(seen))
	}
	slices.Sort(costs)
	var sum time.Duration
	for _, c := range costs {
		sum += c
	}
	t.Logf("audit verify under traffic: %d runs, 0 divergences, %d events appended meanwhile, %d distinct sequences verified; "+
		"%d events compared per run on average; cost per run: mean %s, median %s, p95 %s, max %s",
		runs, appended, len(seen), events/runs, (sum / runs).Round(time.Millisecond), costs[runs/2].Round(time.Millisecond),
		costs[runs*95/100].Round(time.Millisecond), costs[runs-1].Round(time.Millisecond))
}

// quietPool creates pool "quiet": B's demand reclaims slots from A. It
// returns the sequences of A's demand (a grant) and of B's (the reclaim).
func quietPool(t *testing.T, d *deployment) [2]uint64 {
	t.Helper()
	if _, err := d.appendEvents("quiet", `{"type":"plan","data":{"plan":{"consumers":[{"path":"/A","priority":1},{"path":"/B","priority":5}]}}}`,
		`{"type":"host_up","data":{"host":"h1","slots":8}}`); err != nil {
		t.Fatal(err)
	}
	var seqs [2]uint64
	for i, ev := range []string{`{"type":"demand","data":{"demands":{"/A":8}}}`, `{"type":"demand","data":{"demands":{"/B":8}}}`} {
		seq, err := d.appendEvents("quiet", ev)
		if err != nil {
			t.Fatal(err)
		}
		seqs[i] = seq
	}
	d.waitProjected(t, "quiet", seqs[1], 30*time.Second)
	return seqs
}

// testTamperingUnderTraffic changes one row of the quiet pool at a time
// (as someone holding PostgreSQL's superuser credential could) while the
// traffic goes on, and requires verify, of every pool and of the quiet
// one, to name the first divergence: the event, the decision, the
// allocation and the checkpoint.
func testTamperingUnderTraffic(t *testing.T, d *deployment, js jetstream.JetStream, db *pgxpool.Pool, keys *signing.Keyring, seqs [2]uint64) {
	ctx := context.Background()
	owner, err := pgxpool.New(ctx, d.superuserURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	grant, reclaim := int64(seqs[0]), int64(seqs[1])
	cases := []struct {
		name, tamper, undo string
		arg                int64
		seq                uint64 // the sequence verify must name
		what               string // words of the divergence
	}{
		{"event copy", `UPDATE events SET data = '{"demands":{"/A":7}}' WHERE pool = 'quiet' AND seq = $1`,
			`UPDATE events SET data = '{"demands":{"/A":8}}' WHERE pool = 'quiet' AND seq = $1`, grant, seqs[0], "event copy differs"},
		{"decision row", `UPDATE decisions SET slots = slots + 1 WHERE pool = 'quiet' AND event_seq = $1`,
			`UPDATE decisions SET slots = slots - 1 WHERE pool = 'quiet' AND event_seq = $1`, reclaim, seqs[1], "decision"},
		{"allocation row", `UPDATE allocations SET slots = slots + 1 WHERE pool = 'quiet' AND consumer = '/B' AND $1::bigint > 0`,
			`UPDATE allocations SET slots = slots - 1 WHERE pool = 'quiet' AND consumer = '/B' AND $1::bigint > 0`, reclaim, seqs[1], "allocation of /B"},
		{"checkpoint moved back", `UPDATE checkpoints SET last_seq = $1 WHERE pool = 'quiet'`,
			fmt.Sprintf(`UPDATE checkpoints SET last_seq = %d WHERE pool = 'quiet' AND $1::bigint > 0`, reclaim), grant, seqs[1], "checkpoint"},
		{"checkpoint state hash", `UPDATE checkpoints SET state_hash = sha256(state_hash) WHERE pool = 'quiet' AND $1::bigint > 0`,
			``, reclaim, seqs[1], "checkpoint state hash"},
	}
	for _, c := range cases {
		var saved []byte
		if c.undo == "" { // the hash itself is put back
			if err := owner.QueryRow(ctx, `SELECT state_hash FROM checkpoints WHERE pool = 'quiet'`).Scan(&saved); err != nil {
				t.Fatal(err)
			}
		}
		execSQL(t, owner, c.tamper, c.arg)
		for _, pool := range []string{"", "quiet"} {
			_, err := audit.Verify(ctx, js, db, keys, 1, pool, nil)
			var div *audit.Divergence
			if !errors.As(err, &div) || div.Pool != "quiet" || div.Seq != c.seq || !strings.Contains(div.What, c.what) {
				t.Errorf("tampered %s (verify of pool %q): want the divergence named at sequence %d (%s), got %v", c.name, pool, c.seq, c.what, err)
			}
		}
		if c.undo == "" {
			execSQL(t, owner, `UPDATE checkpoints SET state_hash = $1 WHERE pool = 'quiet'`, saved)
		} else {
			execSQL(t, owner, c.undo, c.arg)
		}
		if _, err := audit.Verify(ctx, js, db, keys, 1, "quiet", nil); err != nil {
			t.Fatalf("after undoing the %s change verify still fails: %v", c.name, err)
		}
	}
}
