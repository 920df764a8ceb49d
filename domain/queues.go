package domain

import "github.com/google/btree"

// qkey orders a leaf in one of the engine's queues: by a, then b, then id
// (path order). Each queue gives a and b its own meaning.
type qkey struct {
	a, b int64
	id   int32
}

func qless(x, y qkey) bool {
	if x.a != y.a {
		return x.a < y.a
	}
	if x.b != y.b {
		return x.b < y.b
	}
	return x.id < y.id
}

type queue = btree.BTreeG[qkey]

func newQueue() *queue { return btree.NewG[qkey](16, qless) }

// slot is a leaf's place in one queue.
type slot struct {
	key qkey
	in  bool
}

// queued is where a leaf is filed. In priority mode a leaf is entitled
// (a < min(E,G)), able to borrow (G <= a < min(E, G+limit)), and/or a
// possible victim (a > G). In share_ratio mode it is off target (a != T).
type queued struct {
	entitled, borrowing, victim, offTarget slot
	victimOver                             bool
}

// queues are the incrementally kept orderings that make an event's work
// proportional to what it changes rather than to the size of the tree.
type queues struct {
	entitled     *queue // key (-priority, waitingSince)
	borrowing    *queue // key (waitingSince, -priority)
	victimsOver  *queue // key (priority, -borrowed): top-level branch over its planned share
	victimsUnder *queue // the same for the other branches
	offTarget    *queue // key (0, 0): leaves with a != T
}

func newQueues() queues {
	return queues{newQueue(), newQueue(), newQueue(), newQueue(), newQueue()}
}

// file puts (or keeps, or removes) a leaf in q under key.
func file(q *queue, s *slot, want bool, key qkey) {
	if s.in && (!want || s.key != key) {
		q.Delete(s.key)
		s.in = false
	}
	if want && !s.in {
		q.ReplaceOrInsert(key)
		s.key, s.in = key, true
	}
}

// refile updates every queue a leaf belongs to after its allocation,
// effective demand, target or waiting-since changed.
func (p *Pool) refile(id int32) {
	n, s, q := &p.t.nodes[id], p.sh(id), &p.pub.q
	lq := &s.q
	if !p.mode.shareRatio {
		g := s.target
		entitledTo := minSlots(n.eff, g)
		file(q.entitled, &lq.entitled, n.alloc < entitledTo, qkey{-n.priority, int64(n.waitingSince), id})
		file(q.borrowing, &lq.borrowing, n.alloc >= g && n.alloc < p.borrowCap(id), qkey{int64(n.waitingSince), -n.priority, id})
		over := n.top != noNode && p.sh(n.top).overShare
		want := n.alloc > g && !n.pinned // rules 4: a pinned leaf is never a victim
		key := qkey{n.priority, -int64(n.alloc - g), id}
		if lq.victim.in && lq.victimOver != over {
			p.victimQueue(lq.victimOver).Delete(lq.victim.key)
			lq.victim.in = false
		}
		lq.victimOver = over
		file(p.victimQueue(over), &lq.victim, want, key)
		return
	}
	file(q.offTarget, &lq.offTarget, n.alloc != s.target, qkey{0, 0, id})
}

func (p *Pool) victimQueue(over bool) *queue {
	if over {
		return p.pub.q.victimsOver
	}
	return p.pub.q.victimsUnder
}

// borrowCap is the most a leaf may hold in priority mode: min(E, G+limit),
// the limit defaulting to G.
func (p *Pool) borrowCap(id int32) Slots {
	n := &p.t.nodes[id]
	return minSlots(n.eff, borrowCeiling(n, p.sh(id).target))
}

// unfileAll empties every queue (before a plan or policy change).
func (p *Pool) unfileAll() {
	p.pub.q = newQueues()
	for _, id := range p.t.leaves {
		p.sh(id).q = queued{}
	}
}

// collect returns up to max keys of q in order, starting after from (or at
// the start when from is nil). Callers act on the batch after the scan,
// because acting changes the queue.
func collect(q *queue, from *qkey, max int, buf []qkey) []qkey {
	buf = buf[:0]
	fn := func(k qkey) bool {
		if from != nil && !qless(*from, k) {
			return true
		}
		buf = append(buf, k)
		return len(buf) < max
	}
	if from == nil {
		q.Ascend(fn)
	} else {
		q.AscendGreaterOrEqual(*from, fn)
	}
	return buf
}
