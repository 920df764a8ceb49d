package domain

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cluster-ledger/ledger/events"
)

// Hand-worked tests of ownership assignment (docs/rules.md#assignment): one
// per rule and step, each with its working. Hosts are written
// name:group:slots:workload, previous rows and results "consumer host slots",
// decisions "rule consumer host slots".

func oHost(h string, slots int64) events.OwnEntry  { return events.OwnEntry{Host: h, Slots: &slots} }
func oWhole(h string) events.OwnEntry              { return events.OwnEntry{Host: h} }
func oGroup(g string, slots int64) events.OwnEntry { return events.OwnEntry{Group: g, Slots: &slots} }
func oPref(e events.OwnEntry, p int64) events.OwnEntry {
	e.Preference = &p
	return e
}
func oc(path string, prio int64, own ...events.OwnEntry) ownConsumer {
	return ownConsumer{path: path, priority: prio, own: own}
}

// oHosts parses "h1:g:4:0 h2:g:4:2".
func oHosts(s string) []ownHost {
	var hs []ownHost
	for _, f := range strings.Fields(s) {
		var h ownHost
		p := strings.Split(f, ":")
		h.name, h.group = p[0], p[1]
		fmt.Sscan(p[2], &h.slots)
		fmt.Sscan(p[3], &h.workload)
		hs = append(hs, h)
	}
	return hs
}

// oRows parses "/A h1 4, /B h2 2".
func oRows(s string) []ownSlot {
	var rs []ownSlot
	for _, r := range strings.Split(s, ",") {
		if f := strings.Fields(r); len(f) == 3 {
			var n Slots
			fmt.Sscan(f[2], &n)
			rs = append(rs, ownSlot{f[0], f[1], n})
		}
	}
	return rs
}

func fmtRows(rs []ownSlot) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %s %d", r.consumer, r.host, r.slots))
	}
	return strings.Join(out, ", ")
}

func fmtDecisions(ds []Decision) string {
	var out []string
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%s %s %s %d", d.Rule, d.Consumer, d.Host, d.Slots))
	}
	return strings.Join(out, ", ")
}

func fmtShort(os []ownOutcome) string {
	var out []string
	for _, o := range os {
		if o.short > 0 || len(o.missing) > 0 {
			out = append(out, fmt.Sprintf("%s %d%v", o.path, o.short, o.missing))
		}
	}
	return strings.Join(out, ", ")
}

func TestOwnershipAssignment(t *testing.T) {
	cases := []struct {
		name      string
		consumers []ownConsumer
		hosts     string
		prev      string
		want      string // the assignment
		decisions string
		short     string // consumers short: path slots[missing hosts]
		public    Slots
	}{
		{
			// A owns h1 whole: all 8 of its slots; the public pool is the rest, h2's 4.
			name:      "whole host",
			consumers: []ownConsumer{oc("/A", 0, oWhole("h1"))},
			hosts:     "h1:g:8:0 h2:g:4:0",
			want:      "/A h1 8", decisions: "own.assign /A h1 8", public: 4,
		},
		{
			// A owns 3 of h1's 8 slots. Public: 12 - 3 = 9.
			name:      "part of a host",
			consumers: []ownConsumer{oc("/A", 0, oHost("h1", 3))},
			hosts:     "h1:g:8:0 h2:g:4:0",
			want:      "/A h1 3", decisions: "own.assign /A h1 3", public: 9,
		},
		{
			// Rank: B (priority 5) before A (priority 0). B takes 5 of h1;
			// A asks for h1 whole and takes the 3 left (a partial host,
			// seed 004), short 8 - 3 = 5. Public 0.
			name:      "rank: priority desc",
			consumers: []ownConsumer{oc("/A", 0, oWhole("h1")), oc("/B", 5, oHost("h1", 5))},
			hosts:     "h1:g:8:0",
			want:      "/A h1 3, /B h1 5", decisions: "own.assign /A h1 3, own.assign /B h1 5", short: "/A 5[]",
		},
		{
			// Rank ties go by path: /A before /B, both priority 0, both want
			// h1 whole: A takes 8, B is short 8.
			name:      "rank: then path",
			consumers: []ownConsumer{oc("/B", 0, oWhole("h1")), oc("/A", 0, oWhole("h1"))},
			hosts:     "h1:g:8:0",
			want:      "/A h1 8", decisions: "own.assign /A h1 8", short: "/B 8[]",
		},
		{
			// Preference: the host entry (preference 9) is served before the
			// group entry listed first (default 5). h1 4 to the host entry;
			// the group entry's 4 then come from h2 (2, the rest of group g),
			// short 2. In list order the group would have taken h1 first
			// (least workload) and the host entry would be short.
			name:      "entries by preference, then as listed",
			consumers: []ownConsumer{oc("/A", 0, oGroup("g", 4), oPref(oWhole("h1"), 9))},
			hosts:     "h1:g:4:0 h2:g:2:5",
			want:      "/A h1 4, /A h2 2", decisions: "own.assign /A h1 4, own.assign /A h2 2", short: "/A 2[]",
		},
		{
			// Equal preference: as listed. Both entries preference 5: group g
			// (listed first) takes 2 from h1 (least workload), then h2's host
			// entry takes h2 whole (4). Public 8 - 6 = 2.
			name:      "equal preference: as listed",
			consumers: []ownConsumer{oc("/A", 0, oGroup("g", 2), oWhole("h2"))},
			hosts:     "h1:g:4:0 h2:g:4:1",
			want:      "/A h1 2, /A h2 4", decisions: "own.assign /A h1 2, own.assign /A h2 4", public: 2,
		},
		{
			// Group step 1: A held h1 2, h2 4, h3 3 and now owns 6 of g.
			// Host where it held most first: h2 4, then h3 (3 > 2) 2 of 3,
			// partially. Lost: h1 2 and h3 1; the plan cut its ownership
			// from 9 to 6 (3 slots), so both are own.drop, hosts by name.
			name:      "group step 1: previous slots, most held first",
			consumers: []ownConsumer{oc("/A", 0, oGroup("g", 6))},
			hosts:     "h1:g:4:0 h2:g:4:9 h3:g:4:9",
			prev:      "/A h1 2, /A h2 4, /A h3 3",
			want:      "/A h2 4, /A h3 2", decisions: "own.drop /A h1 2, own.drop /A h3 1", public: 6,
		},
		{
			// Group step 2: least workload first, then name; a host whole
			// while the need is at least its slots, the rest from one host.
			// A held h2 1 before: step 1 takes it back (need 6). Step 2,
			// order h2 (0), h3 (0), h4 (2), h1 (5): h2's other 3 (all it has
			// left, need 3 >= 3), then h3 3 of 4, partially. A: h2 4, h3 3.
			name:      "group step 2: least workload, whole hosts, one partial",
			consumers: []ownConsumer{oc("/A", 0, oGroup("g", 7))},
			hosts:     "h1:g:4:5 h2:g:4:0 h3:g:4:0 h4:g:4:2",
			want:      "/A h2 4, /A h3 3", decisions: "own.assign /A h2 3, own.assign /A h3 3", prev: "/A h2 1", public: 9,
		},
		{
			// Group step 2 skips slots a lower-ranked sibling held before:
			// B (rank 2) held h1 4. A (rank 1) needs 4: h1 is least loaded
			// but its 4 are B's, so A takes h2. B gets h1 back (step 1).
			name:      "group step 2: not a lower rank's previous slots",
			consumers: []ownConsumer{oc("/A", 9, oGroup("g", 4)), oc("/B", 1, oGroup("g", 4))},
			hosts:     "h1:g:4:0 h2:g:4:3",
			prev:      "/B h1 4",
			want:      "/A h2 4, /B h1 4", decisions: "own.assign /A h2 4",
		},
		{
			// Group step 3: no free slot, so A (rank 1) takes what lower
			// ranks held, the lowest rank first: C (priority 1) h2 4, then
			// B (priority 5) 2 of h1. B keeps h1's other 2 (step 1), short 2;
			// C is short 4. B and C lose to a higher rank: own.trim.
			name: "group step 3: lowest rank first",
			consumers: []ownConsumer{oc("/A", 9, oGroup("g", 6)), oc("/B", 5, oGroup("g", 4)),
				oc("/C", 1, oGroup("g", 4))},
			hosts:     "h1:g:4:0 h2:g:4:0",
			prev:      "/B h1 4, /C h2 4",
			want:      "/A h1 2, /A h2 4, /B h1 2",
			decisions: "own.assign /A h1 2, own.assign /A h2 4, own.trim /B h1 2, own.trim /C h2 4",
			short:     "/B 2[], /C 4[]",
		},
		{
			// Group step 3 within one lower sibling: least workload first.
			// B held h1 2 (workload 6) and h2 2 (workload 1); A needs 2 and
			// no slot is free: it takes h2's.
			name:      "group step 3: least workload first",
			consumers: []ownConsumer{oc("/A", 9, oGroup("g", 2)), oc("/B", 0, oGroup("g", 4))},
			hosts:     "h1:g:2:6 h2:g:2:1",
			prev:      "/B h1 2, /B h2 2",
			want:      "/A h2 2, /B h1 2", decisions: "own.assign /A h2 2, own.trim /B h2 2", short: "/B 2[]",
		},
		{
			// Children from their parent's slots only. P owns 8 of g: h1
			// (workload 0) and h2 (1) whole. P/a owns 6 of g: h1 4, h2 2
			// (parent's hosts by workload). P/b owns h3 whole, which P was not
			// given: short 4 (h3's slots). private(P) = 8 - 6 = 2; public =
			// 12 - 8 = 4.
			name: "children from the parent's slots; private pool",
			consumers: []ownConsumer{oc("/P", 0, oGroup("g", 8)), oc("/P/a", 0, oGroup("g", 6)),
				oc("/P/b", 0, oWhole("h3"))},
			hosts:     "h1:g:4:0 h2:g:4:1 h3:g:4:2",
			want:      "/P h1 4, /P h2 4, /P/a h1 4, /P/a h2 2",
			decisions: "own.assign /P h1 4, own.assign /P h2 4, own.assign /P/a h1 4, own.assign /P/a h2 2",
			short:     "/P/b 4[]", public: 4,
		},
		{
			// Host down: A held h1 4 and h2 4 of its 8 in g; h2 is down. h2's
			// 4 are trimmed (host down); step 1 keeps h1 4, step 2 gives h3 4.
			name:      "host down: trim, then reassign",
			consumers: []ownConsumer{oc("/A", 0, oGroup("g", 8))},
			hosts:     "h1:g:4:0 h3:g:4:0",
			prev:      "/A h1 4, /A h2 4",
			want:      "/A h1 4, /A h3 4", decisions: "own.trim /A h2 4, own.assign /A h3 4",
		},
		{
			// A higher rank's host entry takes a host: B held h1 whole; the
			// new plan gives A (priority 9) h1 whole. B is trimmed (a higher
			// rank took its slots) and short 8.
			name:      "a higher rank takes a host: own.trim",
			consumers: []ownConsumer{oc("/A", 9, oWhole("h1")), oc("/B", 0, oWhole("h1"))},
			hosts:     "h1:g:8:0",
			prev:      "/B h1 8",
			want:      "/A h1 8", decisions: "own.assign /A h1 8, own.trim /B h1 8", short: "/B 8[]",
		},
		{
			// The plan no longer gives it: A lost its entries, C left the
			// plan, B's entry names h2 now, not h1. All own.drop. B gets h2.
			name:      "plan no longer gives it: own.drop",
			consumers: []ownConsumer{oc("/A", 0), oc("/B", 0, oWhole("h2"))},
			hosts:     "h1:g:4:0 h2:x:4:0 h3:g:4:0",
			prev:      "/A h1 2, /B h1 2, /C h3 4",
			want:      "/B h2 4", decisions: "own.drop /A h1 2, own.drop /B h1 2, own.assign /B h2 4, own.drop /C h3 4",
			public: 8,
		},
		{
			// A child follows its parent down: P held h1 4 and h2 4 (g 8),
			// P/a held h1 4. h1 goes down: P keeps h2 (step 1) and takes h3
			// (step 2); P/a's h1 4 are trimmed and it takes 4 from its
			// parent's hosts, least workload first: h3 (0) before h2 (5).
			name:      "host down under a parent: the child is reassigned from the parent",
			consumers: []ownConsumer{oc("/P", 0, oGroup("g", 8)), oc("/P/a", 0, oGroup("g", 4))},
			hosts:     "h2:g:4:5 h3:g:4:0",
			prev:      "/P h1 4, /P h2 4, /P/a h1 4",
			want:      "/P h2 4, /P h3 4, /P/a h3 4",
			decisions: "own.trim /P h1 4, own.assign /P h3 4, own.trim /P/a h1 4, own.assign /P/a h3 4",
		},
		{
			// A group entry leaves its owner's host entry that host (#84):
			// the group entry (preference 9) is served first; h1 is the least
			// loaded, but its 4 slots are the host entry's claim, so the group
			// takes h2. The host entry then takes h1 whole: A owns 8, short 0.
			// (Taking h1 for the group would leave the host entry short 4.)
			name:      "a group entry leaves its owner's host entry its host",
			consumers: []ownConsumer{oc("/A", 0, oPref(oGroup("g", 4), 9), oWhole("h1"))},
			hosts:     "h1:g:4:0 h2:g:4:5",
			want:      "/A h1 4, /A h2 4", decisions: "own.assign /A h1 4, own.assign /A h2 4",
		},
		{
			// A host that is not up: the whole-host entry is short by an
			// unknown amount (listed as missing), the partial one by its 3.
			name:      "hosts not up",
			consumers: []ownConsumer{oc("/A", 0, oWhole("h9"), oHost("h8", 3))},
			hosts:     "h1:g:4:0",
			short:     "/A 3[h8 h9]", public: 4,
		},
		{
			// Trimmed to a smaller group while a higher rank also takes:
			// B held h1 4 + h2 4 (g 8); the plan cuts B to g 6 and adds A
			// (priority 9) owning h2 whole. A takes h2 4; B keeps h1 4
			// (step 1), and the remaining 2 find nothing (h2 is A's now).
			// B lost h2 4: 2 are what the plan stopped giving (8 - 6,
			// own.drop), 2 a higher rank took (own.trim).
			name:      "drop and trim on one host",
			consumers: []ownConsumer{oc("/A", 9, oWhole("h2")), oc("/B", 0, oGroup("g", 6))},
			hosts:     "h1:g:4:0 h2:g:4:0",
			prev:      "/B h1 4, /B h2 4",
			want:      "/A h2 4, /B h1 4",
			decisions: "own.assign /A h2 4, own.drop /B h2 2, own.trim /B h2 2",
			short:     "/B 2[]",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := assignOwnership(ownInput{consumers: c.consumers, hosts: oHosts(c.hosts), previous: oRows(c.prev)})
			if got := fmtRows(res.assignment); got != c.want {
				t.Errorf("assignment\n got %s\nwant %s", got, c.want)
			}
			if got := fmtDecisions(res.decisions); got != c.decisions {
				t.Errorf("decisions\n got %s\nwant %s", got, c.decisions)
			}
			if got := fmtShort(res.consumerOutcomes()); got != c.short {
				t.Errorf("short\n got %s\nwant %s", got, c.short)
			}
			if res.public != c.public {
				t.Errorf("public pool %d, want %d", res.public, c.public)
			}
		})
	}
}

// TestOwnershipPrivatePool: private(X) is X's slots its children were not
// assigned, at every level. P owns h1 whole (8); P/a owns 5 of h1, P/a/x
// 2 of them: private(P) = 8 - 5 = 3, private(P/a) = 5 - 2 = 3,
// private(P/a/x) = 2 (a leaf's private pool is its own slots).
func TestOwnershipPrivatePool(t *testing.T) {
	res := assignOwnership(ownInput{
		consumers: []ownConsumer{oc("/P", 0, oWhole("h1")), oc("/P/a", 0, oHost("h1", 5)), oc("/P/a/x", 0, oHost("h1", 2)), oc("/Q", 0)},
		hosts:     oHosts("h1:g:8:0 h2:g:4:0"),
	})
	var got []string
	for _, o := range res.consumerOutcomes() {
		got = append(got, fmt.Sprintf("%s %d/%d", o.path, o.private, o.owned))
	}
	if s := strings.Join(got, ", "); s != "/P 3/8, /P/a 3/5, /P/a/x 2/2, /Q 0/0" || res.public != 4 {
		t.Errorf("private/owned: %s, public %d", s, res.public)
	}
}
