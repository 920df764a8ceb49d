package domain

import (
	"encoding/json"
	"fmt"

	"github.com/cluster-ledger/ledger/events"

	"crypto/sha256"
	"encoding/binary"
	"hash"
	"slices"
)

// Hash is a link of a pool's hash chain.
type Hash [32]byte

// Chain returns the next link of the pool's hash chain after the event
// just applied: SHA-256 over the previous link, the event's stored bytes,
// the decisions it produced and the state it changed (every touched
// consumer's demand, E, target, allocation and holdings). A changed event,
// decision or allocation anywhere in the history changes every later link.
//
// For a refused event pass its refusal reason; the state is unchanged.
func (p *Pool) Chain(prev Hash, event []byte, decisions []Decision, refusal string) Hash {
	h := sha256.New()
	w := hashWriter{h: h}
	w.bytes(prev[:])
	w.bytes(event)
	if refusal != "" {
		w.str("refused")
		w.str(refusal)
		return w.sum()
	}
	w.uint(uint64(len(decisions)))
	for i := range decisions {
		w.decision(&decisions[i])
	}
	if p.allTouch {
		w.str("all")
		for id := 1; id < len(p.t.nodes); id++ {
			p.hashNode(&w, int32(id))
		}
		for _, hst := range p.hosts {
			w.str(hst.name)
			w.int(int64(hst.slots))
			w.int(int64(hst.used))
		}
	} else {
		ids := append([]int32(nil), p.touched...)
		slices.Sort(ids)
		w.uint(uint64(len(ids)))
		for _, id := range ids {
			p.hashNode(&w, id)
		}
	}
	return w.sum()
}

func (p *Pool) hashNode(w *hashWriter, id int32) {
	n := &p.t.nodes[id]
	w.str(n.path)
	w.int(int64(n.demand))
	w.int(int64(n.eff))
	w.int(int64(n.target))
	w.int(int64(n.alloc))
	w.uint(n.waitingSince)
	w.uint(uint64(len(n.holdings)))
	for _, h := range n.holdings {
		w.str(p.hosts[h.host].name)
		w.int(int64(h.slots))
	}
}

// StateHash digests everything a snapshot holds (the pool's name,
// sequence and time, plan, hosts, and every leaf's demand, waiting-since
// and holdings), in a binary canonical form: two pools with equal hashes
// fold every later event identically. It is cheaper than hashing the
// JSON snapshot, since the projector takes one per pool per batch.
func (p *Pool) StateHash() Hash {
	w := hashWriter{h: sha256.New()}
	w.uint(SnapshotFormat)
	w.str(p.name)
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

type hashWriter struct {
	h   hash.Hash
	buf [binary.MaxVarintLen64]byte
}

func (w *hashWriter) uint(v uint64) { w.h.Write(binary.AppendUvarint(w.buf[:0], v)) }
func (w *hashWriter) int(v int64)   { w.h.Write(binary.AppendVarint(w.buf[:0], v)) }
func (w *hashWriter) bytes(b []byte) {
	w.uint(uint64(len(b)))
	w.h.Write(b)
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
	w.h.Write([]byte(s))
}
func (w *hashWriter) sum() (out Hash) {
	w.h.Sum(out[:0])
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
	w.str(d.Rule)
	if d.Deadline != nil {
		w.int(d.Deadline.UnixNano())
	} else {
		w.str("")
	}
}
