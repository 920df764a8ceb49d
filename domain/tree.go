package domain

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/cluster-ledger/ledger/events"
)

const noNode int32 = -1

// node is one consumer. Its id is its index in the tree's nodes, which are
// sorted by path in byte order, so comparing ids compares paths: the
// "then path" tie-break of every ordering is an integer comparison.
type node struct {
	path     string
	parent   int32
	children []int32 // in path order
	depth    int32
	top      int32 // the top-level ancestor (itself if top-level); noNode for the root
	leaf     bool
	lo, hi   int32 // this subtree's leaves are tree.leaves[lo:hi]
	// widestGrace: the largest reclaim_grace of the subtree's leaves (a
	// class of a smaller grace is one some leaf of the pool may not use).
	widestGrace time.Duration

	share        int64
	priority     int64
	max          *events.Max
	borrowLimit  Slots // defaultBorrowLimit when the plan names none (see borrowCeiling)
	reclaimGrace time.Duration
	lendGrace    time.Duration
	lend         bool // lends its unused owned slots, or its pool's leftover (default true)
	own          []events.OwnEntry
	// pinned (rules 4): not preemptable, its own preemptable: false or
	// its nearest ancestor's that sets the field (yarn.go).
	pinned bool

	// Derived from plan and capacity (recomputed on plan and host events).
	maxCap   Slots // max resolved to slots, Unlimited if none
	capChain Slots // min of maxCap over this node and its ancestors

	// Derived from demand (kept incrementally).
	demand    Slots // d; the sum over leaves for a parent
	eff       Slots // E
	childEff  Slots // sum of children's E (parents)
	alloc     Slots // A: held slots (sum over leaves for a parent)
	touchedAt uint64

	leafState
}

// leafState is what only leaves have.
type leafState struct {
	waitingSince uint64
	holdings     []holding // by host id
}

// holding is a number of slots held on one host.
type holding struct {
	host  int32
	slots Slots
}

// defaultBorrowLimit marks a consumer whose plan entry names no
// borrow_limit: it may borrow as much as its guarantee G
// (docs/rules.md#priority).
const defaultBorrowLimit Slots = -1

// borrowCeiling is the most leaf n may hold under priority with
// guarantee g, before its E caps it: G + borrow_limit, the limit being G
// when the plan names none. Every division under priority asks this one
// function.
func borrowCeiling(n *node, g Slots) Slots {
	limit := n.borrowLimit
	if limit == defaultBorrowLimit {
		limit = g
	}
	return satAdd(g, limit)
}

// tree is the consumer tree of one plan. nodes[0] is the implicit root.
type tree struct {
	nodes        []node
	leaves       []int32 // leaf ids in depth-first order (children in path order)
	sortedLeaves []int32 // leaf ids in path order
	byRank       []int32 // leaf ids by rank, made by leavesByRank
	// byEntitled, byBorrow: every leaf in the entitled and the borrow
	// orders as last sorted (inEntitledOrder, inBorrowOrder).
	byEntitled, byBorrow []int32
	// graces: by node id, the distinct reclaim_grace values of its leaves
	// ascending, made when first asked (subtreeGraces).
	graces   [][]time.Duration
	tops     []int32
	byPath   map[string]int32
	hasMax   bool // some consumer has a max: share_ratio/leaf may re-split
	hasPins  bool // rules 4: some leaf is not preemptable (yarn.go)
	maxDepth int32
}

func (t *tree) lookup(path string) (int32, bool) {
	id, ok := t.byPath[path]
	return id, ok
}

// buildTree validates a plan and builds its tree; development lets it name
// the rules version in development. Parents implied by a child's path get
// share 1 and priority 0 (decisions.md #3).
func buildTree(plan events.Plan, development bool) (*tree, error) {
	if err := validateRules(plan, development); err != nil {
		return nil, err
	}
	if err := checkYARNFieldsKnown(plan); err != nil {
		return nil, err
	}
	if err := validatePolicy(plan.Policy); err != nil {
		return nil, err
	}
	if len(plan.Consumers) == 0 {
		return nil, refuse(ErrInvalidPlan, "a plan needs at least one consumer")
	}
	if len(plan.Consumers) > MaxConsumers {
		return nil, refuse(ErrOverflow, "%d consumers (at most %d)", len(plan.Consumers), MaxConsumers)
	}
	specs := make(map[string]events.Consumer, len(plan.Consumers))
	bounded := behaviourOf(RulesOf(plan)).boundedPriority
	zeroShares := zeroSharesAllowed(plan)
	for _, c := range plan.Consumers {
		if err := validateConsumer(c, zeroShares); err != nil {
			return nil, err
		}
		if err := validateOwnEntries(c); err != nil {
			return nil, err
		}
		if bounded && (c.Priority > MaxPriority || c.Priority < -MaxPriority) {
			return nil, refuse(ErrOverflow, "%s has priority %d (at most ±%d)", c.Path, c.Priority, int64(MaxPriority))
		}
		if _, dup := specs[c.Path]; dup {
			return nil, refuse(ErrDuplicatePath, "%s is listed twice", c.Path)
		}
		specs[c.Path] = c
	}
	paths := []string{"/"}
	seen := map[string]bool{"/": true}
	for _, c := range plan.Consumers {
		for p := c.Path; p != "/" && !seen[p]; p = parentPath(p) {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	if len(paths)-1 > MaxConsumers {
		return nil, refuse(ErrOverflow, "%d consumers (at most %d)", len(paths)-1, MaxConsumers)
	}
	slices.Sort(paths)
	t := &tree{nodes: make([]node, len(paths)), byPath: make(map[string]int32, len(paths))}
	for i, p := range paths {
		t.byPath[p] = int32(i)
	}
	for i, p := range paths {
		n := &t.nodes[i]
		n.path, n.parent, n.top, n.share, n.borrowLimit, n.lend = p, noNode, noNode, 1, defaultBorrowLimit, true
		if i > 0 {
			n.parent = t.byPath[parentPath(p)]
			n.depth = t.nodes[n.parent].depth + 1
			t.maxDepth = max(t.maxDepth, n.depth)
			t.nodes[n.parent].children = append(t.nodes[n.parent].children, int32(i))
			n.top = int32(i)
			if n.depth > 1 {
				n.top = t.nodes[n.parent].top
			}
		}
		if c, ok := specs[p]; ok {
			n.share, n.priority, n.max = c.ShareOrDefault(), c.Priority, c.Max
			if c.BorrowLimit != nil {
				n.borrowLimit = Slots(*c.BorrowLimit)
			}
			if c.ReclaimGrace != nil {
				n.reclaimGrace = c.ReclaimGrace.Duration
			}
			if c.LendGrace != nil {
				n.lendGrace = c.LendGrace.Duration
			}
			n.lend = c.LendOrDefault()
			n.own = c.Own
		}
	}
	for i := range t.nodes {
		n := &t.nodes[i]
		n.leaf = i > 0 && len(n.children) == 0
		if n.depth == 1 {
			t.tops = append(t.tops, int32(i))
		}
		if err := checkSiblingShares(t, n); err != nil {
			return nil, err
		}
	}
	if err := validateOwnershipTree(t, specs); err != nil {
		return nil, err
	}
	if err := checkOwnershipRules(plan, behaviourOf(RulesOf(plan))); err != nil {
		return nil, err
	}
	if err := checkYARNWithoutOwnership(plan); err != nil {
		return nil, err
	}
	t.pinLeaves(specs)
	t.layoutLeaves(0)
	for i := len(t.nodes) - 1; i >= 0; i-- { // children after their parents: fold up
		n := &t.nodes[i]
		if n.leaf {
			n.widestGrace = n.reclaimGrace
		}
		if i > 0 {
			p := &t.nodes[n.parent]
			p.widestGrace = max(p.widestGrace, n.widestGrace)
		}
	}
	t.sortedLeaves = slices.Sorted(slices.Values(t.leaves))
	for i := range t.nodes {
		t.hasMax = t.hasMax || t.nodes[i].max != nil
	}
	return t, nil
}

// layoutLeaves lists leaves depth-first and records each subtree's range.
func (t *tree) layoutLeaves(id int32) {
	n := &t.nodes[id]
	n.lo = int32(len(t.leaves))
	if n.leaf {
		t.leaves = append(t.leaves, id)
	}
	for _, c := range n.children {
		t.layoutLeaves(c)
	}
	n.hi = int32(len(t.leaves))
}

// contains reports whether leaf sits in the subtree of n.
func (t *tree) contains(n, leaf int32) bool {
	l := &t.nodes[leaf]
	nd := &t.nodes[n]
	pos := l.lo
	return pos >= nd.lo && pos < nd.hi
}

func checkSiblingShares(t *tree, n *node) error {
	var sum int64
	for _, c := range n.children {
		sum += t.nodes[c].share
	}
	if sum > MaxShare {
		return refuse(ErrOverflow, "the shares of %s's children add up to %d (at most %d)", n.path, sum, MaxShare)
	}
	return nil
}

func parentPath(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// validateConsumer checks one consumer of a plan; zeroShares: a share of
// 0 is allowed (rules 4 under share_ratio, zeroSharesAllowed).
func validateConsumer(c events.Consumer, zeroShares bool) error {
	if err := validatePath(c.Path); err != nil {
		return err
	}
	if s := c.ShareOrDefault(); s < 0 || (s == 0 && !zeroShares) {
		return refuse(ErrZeroShare, "%s has share %d%s", c.Path, s, zeroShareHint(s))
	} else if s > MaxShare {
		return refuse(ErrOverflow, "%s has share %d (at most %d)", c.Path, s, MaxShare)
	}
	if m := c.Max; m != nil {
		if m.IsPercent && (m.Percent < 1 || m.Percent > 100) {
			return refuse(ErrPercentRange, "%s has max %d%%", c.Path, m.Percent)
		}
		if !m.IsPercent {
			if err := checkQuantity(c.Path+" max", m.Slots); err != nil {
				return err
			}
		}
	}
	if c.BorrowLimit != nil {
		if err := checkQuantity(c.Path+" borrow_limit", *c.BorrowLimit); err != nil {
			return err
		}
	}
	for _, g := range []*events.Duration{c.ReclaimGrace, c.LendGrace} {
		if g != nil && g.Duration < 0 {
			return refuse(ErrInvalidPlan, "%s has a negative grace period", c.Path)
		}
	}
	return nil
}

func checkQuantity(what string, v int64) error {
	if v < 0 {
		return refuse(ErrNegativeSlots, "%s is %d", what, v)
	}
	if Slots(v) > MaxQuantity {
		return refuse(ErrOverflow, "%s is %d (at most %d)", what, v, MaxQuantity)
	}
	return nil
}

// validatePath accepts absolute paths of non-empty segments without ".",
// "..", white space or control characters (decisions.md #2).
func validatePath(p string) error {
	if p == "/" {
		return refuse(ErrInvalidPath, "the root %q is implicit and cannot be listed", p)
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return refuse(ErrInvalidPath, "%q: a path starts with / and does not end with /", p)
	}
	for _, seg := range strings.Split(p[1:], "/") {
		if seg == "" || seg == "." || seg == ".." {
			return refuse(ErrInvalidPath, "%q: segment %q (empty, . and .. are not allowed)", p, seg)
		}
		if strings.IndexFunc(seg, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
			return refuse(ErrInvalidPath, "%q: white space or control character in a path", p)
		}
	}
	return nil
}

// restrictiveFor reports whether owner's part, lent to leaf (the leaf may
// hold it), is in a class its pool divides before the pool's own slots:
// one that some leaf of the pool may not use (a lending chain's grace below
// the pool's widest reclaim_grace; docs/rules.md#layered-fold). Rules 4
// seats, keeps and places such parts before the pool's own (docs/decisions.md
// #218).
func (t *tree) restrictiveFor(leaf, owner int32) bool {
	if owner == noNode || owner == leaf || t.contains(owner, leaf) {
		return false
	}
	top := t.commonAncestor(owner, leaf)
	grace := time.Duration(math.MaxInt64)
	for o := owner; o != top; o = t.nodes[o].parent {
		grace = min(grace, t.nodes[o].lendGrace)
	}
	return grace < t.nodes[top].widestGrace
}

// commonAncestor is the deepest consumer whose subtree holds both a and b
// (the root, 0, when only it does).
func (t *tree) commonAncestor(a, b int32) int32 {
	for t.nodes[a].depth > t.nodes[b].depth {
		a = t.nodes[a].parent
	}
	for t.nodes[b].depth > t.nodes[a].depth {
		b = t.nodes[b].parent
	}
	for a != b {
		a, b = t.nodes[a].parent, t.nodes[b].parent
	}
	return a
}

// leavesByRank lists the leaves by rank (priority desc, then path),
// computed once per tree.
func (t *tree) leavesByRank() []int32 {
	if t.byRank == nil {
		t.byRank = slices.Clone(t.leaves)
		slices.SortFunc(t.byRank, func(a, b int32) int {
			return cmp.Or(cmpDesc(t.nodes[a].priority, t.nodes[b].priority), cmp.Compare(a, b))
		})
	}
	return t.byRank
}

// keeperOrder orders leaves keeping slots where there is not room for
// all of them (a pool's division, a part of a host): the reverse of the
// return order (docs/rules.md#seating), priority desc, then fewest slots
// (sa, sb: what each holds there), then path descending, so the leaves
// left without are those that give back first: lowest priority, most
// slots, path. Every division and seating asks this one function; the
// placement's step 1 keeps in an order of its own (partKeepOrder).
func (t *tree) keeperOrder(a int32, sa Slots, b int32, sb Slots) int {
	return cmp.Or(cmpDesc(t.nodes[a].priority, t.nodes[b].priority), cmp.Compare(sa, sb), cmpDesc(a, b))
}

// entitledOrder orders leaves as docs/rules.md#priority serves entitled ones:
// priority desc, waiting since asc, path.
func (t *tree) entitledOrder(a, b int32) int {
	x, y := &t.nodes[a], &t.nodes[b]
	return cmp.Or(cmpDesc(x.priority, y.priority), cmp.Compare(x.waitingSince, y.waitingSince), cmp.Compare(a, b))
}

// borrowOrder orders borrowers first come first served: waiting since
// asc, priority desc, path.
func (t *tree) borrowOrder(a, b int32) int {
	x, y := &t.nodes[a], &t.nodes[b]
	return cmp.Or(cmp.Compare(x.waitingSince, y.waitingSince), cmpDesc(x.priority, y.priority), cmp.Compare(a, b))
}

// victimOrder orders the leaves above their G as docs/rules.md#priority
// reclaims from them: a leaf whose branch holds more than its planned
// share first (over), then lowest priority, then most above G (above),
// then path. The layered and kept folds ask it; a pool without ownership
// keeps it as its victim queues (queues.go refile: one queue per over,
// keyed priority, -above, path).
func (t *tree) victimOrder(a int32, overA bool, aboveA Slots, b int32, overB bool, aboveB Slots) int {
	return cmp.Or(boolFirst(overA, overB), cmp.Compare(t.nodes[a].priority, t.nodes[b].priority), cmpDesc(aboveA, aboveB), cmp.Compare(a, b))
}

// inEntitledOrder and inBorrowOrder are every leaf in the entitled and
// the borrow order. Both read waiting-since, which events change, so
// each call sorts again; it sorts the order the last call left, which a
// few events change little (already sorted, it is one pass), and both
// orders are total, so the result is the same from any start. The caller
// must not change the slice, nor keep it past the next call.
func (t *tree) inEntitledOrder() []int32 {
	if t.byEntitled == nil {
		t.byEntitled = slices.Clone(t.leaves)
	}
	slices.SortFunc(t.byEntitled, t.entitledOrder)
	return t.byEntitled
}

func (t *tree) inBorrowOrder() []int32 {
	if t.byBorrow == nil {
		t.byBorrow = slices.Clone(t.leaves)
	}
	slices.SortFunc(t.byBorrow, t.borrowOrder)
	return t.byBorrow
}
