package api

// Names that differ only by case (docs/decisions.md 255, 256): the
// API's admission, beside events.CheckNames, never the engine's (a
// released rules version decides as it did: domain/ is untouched).

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/text/cases"

	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// fold is the form in which two names are the same name to a reader:
// Unicode full case folding (golang.org/x/text/cases, not strings.ToLower:
// "STRASSE" and "straße", "ΟΔΟΣ" and "οδος" fold alike). A Caser is
// not safe for concurrent use: one per call.
func fold(name string) string { return cases.Fold().String(name) }

// defaultGroup is the group of a host_up without one, as the engine
// names it.
const defaultGroup = "default"

// allSubjects matches every stored event: ledger.<pool>.<type>, and
// ledger.<pool>.<type>.<partition> (internal/stream).
const allSubjects = "ledger.>"

// folded is a set of names by their folded form.
type folded map[string][]string

// add records name and returns a different name of the set that folds
// alike ("" when none, or when name is in the set already: a name the
// pool holds is not new, even beside a variant it holds from before).
func (f folded) add(name string) string {
	k := fold(name)
	names := f[k]
	for _, n := range names {
		if n == name {
			return ""
		}
	}
	f[k] = append(names, name)
	if len(names) > 0 {
		return names[0]
	}
	return ""
}

// checkFolds refuses (422 invalid_name) an event that would bring into
// the pool a name differing only by case from one it has: a host (up or
// down, or named by an own entry) or a group beside the pool's hosts'
// and those of the request's earlier events; a consumer path (its
// implied parents included) beside another path of the same plan (a
// plan replaces the consumers: a path only the old plan has no longer
// exists, so renaming "/a" to "/A" is allowed). Two paths of a plan
// that the pool has both from before are let be.
func checkFolds(p *domain.Pool, ins []incoming, fresh []int) *apiError {
	var hosts, groups folded
	known := func() {
		if hosts != nil {
			return
		}
		hosts, groups = folded{}, folded{}
		for _, h := range p.Hosts() {
			hosts.add(h.Name)
			groups.add(h.Group)
		}
	}
	for _, i := range fresh {
		var err error
		switch e := ins[i].payload.(type) {
		case *events.HostUp:
			known()
			err = clash("host", e.Host, hosts.add(e.Host), "the pool has")
			if err == nil {
				err = clash("group", cmp.Or(e.Group, defaultGroup), groups.add(cmp.Or(e.Group, defaultGroup)), "the pool's hosts have")
			}
		case *events.PlanChange:
			err = planFolds(p, e, func() (folded, folded) { known(); return hosts, groups })
		}
		if err != nil {
			return refusal(err, at(i))
		}
	}
	return nil
}

// planFolds checks a plan's paths against each other, and its own
// entries' hosts and groups against the pool's (known gives them).
func planFolds(p *domain.Pool, e *events.PlanChange, known func() (folded, folded)) error {
	paths := folded{}
	for _, c := range e.Plan.Consumers {
		for end := 1; end <= len(c.Path); end++ {
			if end < len(c.Path) && c.Path[end] != '/' {
				continue
			}
			path := c.Path[:end]
			if other := paths.add(path); other != "" {
				_, had := p.Consumer(path)
				_, hadOther := p.Consumer(other)
				if !had || !hadOther {
					return clash("consumer path", path, other, "this plan lists")
				}
			}
		}
		for _, o := range c.Own {
			hosts, groups := known()
			if err := clash("host", o.Host, hosts.add(o.Host), "the pool has"); err != nil {
				return err
			}
			if o.Group != "" {
				if err := clash("group", o.Group, groups.add(o.Group), "the pool's hosts have"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// clash words a refusal of name beside other ("" is no clash).
func clash(kind, name, other, where string) error {
	if other == "" {
		return nil
	}
	return fmt.Errorf("%w: %s %q differs only by case from %q, which %s: names that differ only by case would read as one; write %q, or a name of its own",
		events.ErrInvalidName, kind, name, other, where, other)
}

// poolNamesFresh is how long the pools' names read from the stream are
// trusted for the check of a new pool's name: a second of another
// instance's new pools may be missed; the stream is listed once a second
// at most, however many new pools are asked for.
const poolNamesFresh = time.Second

// poolNames are the names of the pools in the stream, by folded form,
// read at most every poolNamesFresh (on a new pool's first append), and
// the new pools this instance is creating now.
type poolNames struct {
	mu    sync.Mutex
	read  time.Time
	names folded
	// creating counts this instance's appends now creating each new pool,
	// by folded form and name: "Prod" and "prod" asked for at once both
	// passed the check before either was stored, and both were created.
	creating map[string]map[string]int
}

// reserve returns the name of a pool of the stream, or of one this
// instance is creating now, that differs from pool only by case ("" when
// none, or when pool itself is there). When it returns "", pool is
// reserved until release is called (once its first append is stored or
// failed): until then a variant of it is refused.
func (n *poolNames) reserve(ctx context.Context, st jetstream.Stream, pool string) (other string, release func(), err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.names == nil || time.Since(n.read) > poolNamesFresh {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(allSubjects))
		if err != nil {
			return "", nil, err
		}
		names := folded{}
		for subject := range info.State.Subjects {
			if p, err := stream.PoolOf(subject); err == nil {
				names.add(p)
			}
		}
		n.names, n.read = names, time.Now()
	}
	k := fold(pool)
	for name := range n.creating[k] {
		if name != pool {
			return name, nil, nil
		}
	}
	found := false
	for _, name := range n.names[k] {
		if name == pool {
			found = true
		}
	}
	if names := n.names[k]; !found && len(names) > 0 {
		return names[0], nil, nil
	}
	if n.creating == nil {
		n.creating = map[string]map[string]int{}
	}
	if n.creating[k] == nil {
		n.creating[k] = map[string]int{}
	}
	n.creating[k][pool]++
	var once sync.Once
	return "", func() {
		once.Do(func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.creating[k][pool]--; n.creating[k][pool] <= 0 {
				delete(n.creating[k], pool)
			}
			if len(n.creating[k]) == 0 {
				delete(n.creating, k)
			}
		})
	}, nil
}

// added records a pool this instance has just created.
func (n *poolNames) added(pool string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.names != nil {
		n.names.add(pool)
	}
}

// checkPoolName refuses the first events of a pool whose name differs
// only by case from a pool the stream has ("Prod" beside "prod"), or one
// this instance is creating at the same moment; otherwise the pool's name
// is reserved until release.
func (s *Server) checkPoolName(ctx context.Context, pool string) (release func(), aerr *apiError) {
	other, release, err := s.poolNames.reserve(ctx, s.stream, pool)
	if err != nil {
		return nil, unavailable(ReasonUnavailable, fmt.Sprintf("pool %s is new, and the pools' names could not be read from the stream to compare it; nothing was stored: retry", pool), err)
	}
	if other != "" {
		return nil, refusal(fmt.Errorf("%w: pool %q differs only by case from the pool %q, which exists: pool names that differ only by case would read as one; write %q, or a name of its own",
			events.ErrInvalidName, pool, other, other), nil)
	}
	return release, nil
}
