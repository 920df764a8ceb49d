package domain

import (
	"encoding/json"
	"fmt"

	"github.com/cluster-ledger/ledger/events"

	"crypto/sha256"
	"encoding/binary"
	"hash"
)

// Hash is a link of a pool's hash chain.
type Hash [32]byte

// Chain returns the next link of a pool's hash chain: SHA-256 over the
// previous link, the event's stored bytes and what the event did (its
// Result: the decisions, and the state of every consumer and host it
// touched; for a refused event, the refusal's stable code, never its
// message). A changed event, decision or allocation anywhere in the
// history changes every later link. It is a function of its arguments
// only.
func Chain(prev Hash, event []byte, r *Result) Hash {
	w := hashWriter{h: sha256.New()}
	w.bytes(prev[:])
	w.bytes(event)
	if r.Refused != "" {
		w.str("refused")
		w.str(string(r.Refused))
		return w.sum()
	}
	w.uint(uint64(len(r.Decisions)))
	for i := range r.Decisions {
		w.decision(&r.Decisions[i])
	}
	if r.All {
		w.str("all")
	} else {
		w.uint(uint64(len(r.Changed)))
	}
	for i := range r.Changed {
		w.consumer(&r.Changed[i])
	}
	for _, h := range r.Hosts {
		w.str(h.Name)
		w.int(h.Slots)
		w.int(h.Used)
	}
	return w.sum()
}

func (w *hashWriter) consumer(c *ConsumerState) {
	w.str(c.Path)
	w.int(c.Demand)
	w.int(c.Effective)
	w.int(c.Target)
	w.int(c.Allocated)
	w.uint(c.WaitingSince)
	w.uint(uint64(len(c.Holdings)))
	for _, h := range c.Holdings {
		w.str(h.Host)
		w.int(h.Slots)
	}
}

// StateHash digests everything a snapshot holds (the pool's name,
// sequence and time, plan, hosts, and every leaf's demand, waiting-since
// and holdings), in a binary canonical form: two pools with equal hashes
// fold every later event identically. It is cheaper than hashing the
// JSON snapshot, since the projector takes one per pool per batch.
func (p *Pool) StateHash() Hash {
	w := hashWriter{h: sha256.New()}
	w.uint(snapshotFormatWithoutOwnership) // never changes: stored checkpoints hold these hashes
	w.str(p.name)
	w.uint(uint64(p.policy.Rules))
	w.uint(p.rulesSince)
	w.uint(p.seq)
	w.int(p.now.UnixNano())
	w.bytes(p.planDigest[:])
	w.uint(uint64(len(p.hosts)))
	for _, h := range p.hosts {
		w.str(h.name)
		w.str(h.group)
		w.int(int64(h.slots))
		w.bool(h.up)
	}
	leaves := p.leavesByPath()
	w.uint(uint64(len(leaves)))
	for _, id := range leaves {
		n := &p.t.nodes[id]
		w.str(n.path)
		w.int(int64(n.demand))
		w.uint(n.waitingSince)
		w.uint(uint64(len(n.holdings)))
		for _, h := range n.holdings {
			w.str(p.hosts[h.host].name)
			w.int(int64(h.slots))
		}
	}
	if len(p.own) > 0 { // only pools with ownership: every other hash is as before
		w.str("own")
		w.uint(uint64(len(p.own)))
		for _, o := range p.own {
			w.str(o.consumer)
			w.str(o.host)
			w.int(int64(o.slots))
		}
	}
	return w.sum()
}

// digestPlan is the plan's part of StateHash, computed once per plan.
func digestPlan(hasPlan bool, plan events.Plan) Hash {
	if !hasPlan {
		return Hash{}
	}
	b, err := json.Marshal(plan)
	if err != nil {
		panic(fmt.Sprintf("domain: plan encoding cannot fail: %v", err))
	}
	return sha256.Sum256(b)
}

// hashWriter feeds SHA-256 the canonical form of what it hashes. The
// pieces are small (a varint, a path), so they are gathered in buf and
// handed to the hash a buffer at a time: one call per field through the
// hash.Hash interface, and a string's conversion to bytes for it, cost
// more than the hashing. The bytes hashed, and so every link, are the
// same.
type hashWriter struct {
	h   hash.Hash
	n   int
	buf [512]byte
}

func (w *hashWriter) flush() {
	w.h.Write(w.buf[:w.n])
	w.n = 0
}

// room makes room for k more bytes in buf (k <= len(buf)).
func (w *hashWriter) room(k int) {
	if w.n+k > len(w.buf) {
		w.flush()
	}
}

func (w *hashWriter) uint(v uint64) {
	w.room(binary.MaxVarintLen64)
	w.n += binary.PutUvarint(w.buf[w.n:], v)
}

func (w *hashWriter) int(v int64) {
	w.room(binary.MaxVarintLen64)
	w.n += binary.PutVarint(w.buf[w.n:], v)
}

func (w *hashWriter) bytes(b []byte) {
	w.uint(uint64(len(b)))
	if w.n+len(b) > len(w.buf) {
		w.flush()
		w.h.Write(b)
		return
	}
	w.n += copy(w.buf[w.n:], b)
}

func (w *hashWriter) bool(b bool) {
	if b {
		w.uint(1)
	} else {
		w.uint(0)
	}
}

func (w *hashWriter) str(s string) {
	w.uint(uint64(len(s)))
	for len(s) > 0 {
		if w.n == len(w.buf) {
			w.flush()
		}
		k := copy(w.buf[w.n:], s)
		w.n += k
		s = s[k:]
	}
}

func (w *hashWriter) sum() (out Hash) {
	w.flush()
	copy(out[:], w.h.Sum(w.buf[:0])) // into the flushed buffer: out would escape
	return out
}

func (w *hashWriter) decision(d *Decision) {
	w.uint(d.Seq)
	w.uint(uint64(d.Ordinal))
	w.str(string(d.Kind))
	w.str(d.Consumer)
	w.str(d.From)
	w.str(d.Host)
	w.int(d.Slots)
	w.str(string(d.Rule))
	if d.Deadline != nil {
		w.int(d.Deadline.UnixNano())
	} else {
		w.str("")
	}
}
