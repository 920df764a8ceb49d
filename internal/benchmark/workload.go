package benchmark

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/domain"
	"github.com/cluster-ledger/ledger/events"
	"github.com/cluster-ledger/ledger/internal/stream"
)

// The benchmark pool: a 10×10×10 tree (1,000 leaves, shares 1..4,
// priorities 0..2) on 20 hosts of 100 slots. Demand of 0..6 a leaf
// (about 3 on average) asks for half again as many slots as there are, so
// leaves borrow, wait and are reclaimed from.
const (
	fanout    = 10
	numHosts  = 20
	hostSlots = 100
	maxDemand = 6
	producer  = "bench"
)

// setup returns the events that create the benchmark pool: its plan, then
// its hosts.
func setup() []events.Payload {
	rng := rand.New(rand.NewPCG(7, 11))
	var cs []events.Consumer
	node := func(path string) {
		share := int64(1 + rng.IntN(4))
		cs = append(cs, events.Consumer{Path: path, Share: &share, Priority: int64(rng.IntN(3))})
	}
	for i := range fanout {
		node(fmt.Sprintf("/d%d", i))
		for j := range fanout {
			node(fmt.Sprintf("/d%d/t%d", i, j))
			for k := range fanout {
				node(fmt.Sprintf("/d%d/t%d/a%d", i, j, k))
			}
		}
	}
	out := []events.Payload{&events.PlanChange{Plan: events.Plan{Consumers: cs}}}
	for h := range numHosts {
		out = append(out, &events.HostUp{Host: fmt.Sprintf("h%02d", h), Slots: hostSlots})
	}
	return out
}

// ownedSetup is setup with ownership by group (rules v3): the 20 hosts
// in 4 groups of 5; each department owns 100 slots of one group, its
// first five teams 20 each of them, and their first five applications 4
// each: 250 leaves own slots, half the pool's 2,000 slots are owned.
func ownedSetup() []events.Payload {
	ps := setup()
	plan := ps[0].(*events.PlanChange).Plan
	plan.Rules = 3
	group := func(i int) string { return fmt.Sprintf("g%d", i%4) }
	owns := func(g string, slots int64) []events.OwnEntry {
		return []events.OwnEntry{{Group: g, Slots: &slots}}
	}
	cs := make([]events.Consumer, len(plan.Consumers))
	copy(cs, plan.Consumers)
	for k := range cs {
		var i, j, a int
		switch n, _ := fmt.Sscanf(cs[k].Path, "/d%d/t%d/a%d", &i, &j, &a); n {
		case 1:
			cs[k].Own = owns(group(i), 100)
		case 2:
			if j < 5 {
				cs[k].Own = owns(group(i), 20)
			}
		case 3:
			if j < 5 && a < 5 {
				cs[k].Own = owns(group(i), 4)
			}
		}
	}
	plan.Consumers = cs
	out := []events.Payload{&events.PlanChange{Plan: plan}}
	for h := range numHosts {
		out = append(out, &events.HostUp{Host: fmt.Sprintf("h%02d", h), Group: group(h / 5), Slots: hostSlots})
	}
	return out
}

func leafPaths() []string {
	var out []string
	for i := range fanout {
		for j := range fanout {
			for k := range fanout {
				out = append(out, fmt.Sprintf("/d%d/t%d/a%d", i, j, k))
			}
		}
	}
	return out
}

// generator produces a realistic stream of valid events for one pool:
// mostly one leaf's demand, sometimes a few leaves' at once, and releases
// of slots a leaf holds. It folds what it produces into a mirror of the
// pool so that every release is one the engine accepts.
type generator struct {
	rng    *rand.Rand
	leaves []string
	mirror *domain.Pool
	seq    uint64
	at     time.Time
}

// newGenerator returns a generator whose mirror has the setup applied;
// the same seed gives the same events.
func newGenerator(seed uint64) *generator { return newGeneratorFor(seed, setup()) }

// newGeneratorFor is newGenerator for a pool made by the events of setup
// (the same tree of leaves: setup or ownedSetup).
func newGeneratorFor(seed uint64, setup []events.Payload) *generator {
	g := &generator{
		rng:    rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		leaves: leafPaths(),
		mirror: domain.NewPool("mirror"),
		at:     time.Now().UTC().Truncate(time.Microsecond),
	}
	for _, p := range setup {
		g.apply(p)
	}
	return g
}

func (g *generator) apply(p events.Payload) {
	g.seq++
	g.at = g.at.Add(time.Millisecond)
	if _, err := g.mirror.Apply(domain.Event{Seq: g.seq, Time: g.at, Payload: p}); err != nil {
		panic(fmt.Sprintf("benchmark: generated an invalid event %#v: %v", p, err))
	}
}

func (g *generator) leaf() string { return g.leaves[g.rng.IntN(len(g.leaves))] }

// next returns the next event: 75% one leaf's demand, 15% two to five
// leaves' demand, 10% a release (when a leaf holding slots is found).
func (g *generator) next() events.Payload {
	var p events.Payload
	switch r := g.rng.IntN(100); {
	case r < 10:
		for range 8 {
			l := g.leaf()
			if c, _ := g.mirror.Consumer(l); c.Allocated > 0 {
				p = &events.Release{Consumer: l, Slots: 1 + g.rng.Int64N(min(c.Allocated, 3))}
				break
			}
		}
	case r < 25:
		d := &events.Demand{Demands: map[string]int64{}}
		for n := 2 + g.rng.IntN(4); len(d.Demands) < n; {
			d.Demands[g.leaf()] = g.rng.Int64N(maxDemand + 1)
		}
		p = d
	}
	if p == nil {
		p = &events.Demand{Demands: map[string]int64{g.leaf(): g.rng.Int64N(maxDemand + 1)}}
	}
	g.apply(p)
	return p
}

// envelopeMsg is a payload as the ledger stores it: the envelope, JSON,
// on the pool's subject, with the event id as the message id.
func envelopeMsg(pool, id string, at time.Time, p events.Payload) (*nats.Msg, error) {
	env, err := events.New(id, pool, producer, at, p)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(stream.Subject(pool, p.EventType()))
	m.Data = b
	m.Header.Set(jetstream.MsgIDHeader, id)
	return m, nil
}

// signAll signs msgs as the ledger does (when the run is signed), over
// every core: the harness writes logs of up to a million events.
func (b *bench) signAll(msgs []*nats.Msg) {
	if b.signer != nil {
		b.signer.SignAll(msgs)
	}
}

// requestBody is the body of a POST of one event (array false) or of
// several (array true), as a producer would send it.
func requestBody(ids []string, ps []events.Payload, array bool) ([]byte, error) {
	rqs := make([]client.Event, len(ps))
	for i, p := range ps {
		data, err := json.Marshal(p)
		if err != nil {
			return nil, err
		}
		rqs[i] = client.Event{ID: ids[i], Type: string(p.EventType()), Producer: producer, Data: data}
	}
	if !array {
		return json.Marshal(rqs[0])
	}
	return json.Marshal(rqs)
}
