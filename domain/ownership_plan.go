package domain

import (
	"maps"
	"slices"

	"github.com/cluster-ledger/ledger/events"
)

// Validation of a plan's ownership fields (docs/rules.md#ownership). A plan
// that fails any check is refused whole and changes nothing. The checks run
// before the rules-version gate (checkOwnershipRules), so an operator learns
// what is wrong with a plan before learning that its version cannot run it.

// validateOwnEntries checks one consumer's own list on its own: the form
// of each entry, its slots, preference and names, and that no host is
// named twice. Entries are checked in the order listed, so the first bad
// one is the one reported.
func validateOwnEntries(c events.Consumer) error {
	seen := make(map[string]bool, len(c.Own))
	for i, o := range c.Own {
		switch {
		case o.Host != "" && o.Group != "":
			return refuse(ErrInvalidOwnEntry, "%s own[%d] names both host %q and group %q", c.Path, i, o.Host, o.Group)
		case o.Host == "" && o.Group == "":
			return refuse(ErrInvalidOwnEntry, "%s own[%d] names neither a host nor a group", c.Path, i)
		case o.Group != "" && o.Slots == nil:
			return refuse(ErrInvalidOwnEntry, "%s own[%d]: group %q needs slots (a group entry owns N slots of the group)", c.Path, i, o.Group)
		}
		if o.Host != "" {
			if err := events.ValidateHostName(o.Host); err != nil {
				return refuse(err, "in %s own[%d]", c.Path, i)
			}
			if seen[o.Host] {
				return refuse(ErrDuplicateOwnHost, "%s names host %q twice", c.Path, o.Host)
			}
			seen[o.Host] = true
		} else if err := events.ValidateGroupName(o.Group); err != nil {
			return refuse(err, "in %s own[%d]", c.Path, i)
		}
		if o.Slots != nil {
			if *o.Slots <= 0 {
				return refuse(ErrNonPositive, "%s own[%d] has %d slots", c.Path, i, *o.Slots)
			}
			if Slots(*o.Slots) > MaxQuantity {
				return refuse(ErrOverflow, "%s own[%d] has %d slots (at most %d)", c.Path, i, *o.Slots, MaxQuantity)
			}
		}
		if p := o.PreferenceOrDefault(); p < events.MinPreference || p > events.MaxPreference {
			return refuse(ErrPreferenceRange, "%s own[%d] has preference %d (%d..%d)", c.Path, i, p, events.MinPreference, events.MaxPreference)
		}
	}
	return nil
}

// validateOwnershipTree checks ownership across the tree: a child owns
// only if its parent owns something, and the children together never
// statically own more than their parent, compared like with like (per
// host the parent names, per group the parent names). A child's entry on
// a host or group its parent does not name is left to assignment: it
// stays short if the parent was not given those slots. Nodes are visited
// in path order, so the reported violation is the same on every run.
func validateOwnershipTree(t *tree, specs map[string]events.Consumer) error {
	for i := 1; i < len(t.nodes); i++ {
		n := &t.nodes[i]
		if len(specs[n.path].Own) == 0 || n.parent == 0 {
			continue
		}
		if parent := t.nodes[n.parent].path; len(specs[parent].Own) == 0 {
			return refuse(ErrParentOwnsNothing, "%s owns resources but its parent %s owns nothing (a child's ownership is assigned from its parent's)", n.path, parent)
		}
	}
	for i := 1; i < len(t.nodes); i++ {
		n := &t.nodes[i]
		own := specs[n.path].Own
		if len(own) == 0 || len(n.children) == 0 {
			continue
		}
		if err := checkChildrenWithin(t, n, own, specs); err != nil {
			return err
		}
	}
	return nil
}

// hostClaim sums the claims on one host: whole-host entries and slots.
type hostClaim struct {
	whole int   // entries owning the whole host
	slots Slots // slots of the partial entries, saturated at Unlimited
}

// checkChildrenWithin compares n's children's static ownership with n's.
// On a host n owns whole, the children may own it whole once (and nothing
// more of it) or any number of slots (the host's size is not part of the
// plan, so assignment decides how much exists). On a host n owns N slots
// of, a child may not own it whole and the children's slots may not add up
// to more than N. On a group n names, the children's slots of that group
// may not add up to more than n's.
func checkChildrenWithin(t *tree, n *node, own []events.OwnEntry, specs map[string]events.Consumer) error {
	parentHosts := map[string]hostClaim{}
	parentGroups := map[string]Slots{}
	for _, o := range own {
		switch {
		case o.WholeHost():
			parentHosts[o.Host] = hostClaim{whole: 1}
		case o.Host != "":
			parentHosts[o.Host] = hostClaim{slots: Slots(*o.Slots)}
		default:
			parentGroups[o.Group] = satAdd(parentGroups[o.Group], Slots(*o.Slots))
		}
	}
	childHosts := map[string]hostClaim{}
	childGroups := map[string]Slots{}
	for _, c := range n.children {
		for _, o := range specs[t.nodes[c].path].Own {
			if _, named := parentHosts[o.Host]; o.Host != "" && named {
				hc := childHosts[o.Host]
				if o.WholeHost() {
					hc.whole++
				} else {
					hc.slots = satAdd(hc.slots, Slots(*o.Slots))
				}
				childHosts[o.Host] = hc
			}
			if _, named := parentGroups[o.Group]; o.Group != "" && named {
				childGroups[o.Group] = satAdd(childGroups[o.Group], Slots(*o.Slots))
			}
		}
	}
	for _, h := range slices.Sorted(maps.Keys(childHosts)) {
		pc, cc := parentHosts[h], childHosts[h]
		if pc.whole == 1 {
			if cc.whole > 1 || (cc.whole == 1 && cc.slots > 0) {
				return refuse(ErrChildrenOwnMore, "%s owns host %s whole, and its children claim it whole more than once or whole plus slots", n.path, h)
			}
			continue
		}
		if cc.whole > 0 {
			return refuse(ErrChildrenOwnMore, "%s owns %d slots of host %s, and a child claims the whole host", n.path, pc.slots, h)
		}
		if cc.slots > pc.slots {
			return refuse(ErrChildrenOwnMore, "%s owns %d slots of host %s, and its children %d", n.path, pc.slots, h, cc.slots)
		}
	}
	for _, g := range slices.Sorted(maps.Keys(childGroups)) {
		if childGroups[g] > parentGroups[g] {
			return refuse(ErrChildrenOwnMore, "%s owns %d slots of group %s, and its children %d", n.path, parentGroups[g], g, childGroups[g])
		}
	}
	return nil
}

// checkOwnershipRules refuses ownership fields under a rules version that
// does not implement ownership (versions 1 and 2): a plan the engine
// accepted but folded without its ownership would be stored with a
// meaning that changes the day ownership is implemented.
func checkOwnershipRules(plan events.Plan, b behaviour) error {
	if !plan.HasOwnership() {
		return nil
	}
	if !b.ownership {
		return refuse(ErrOwnershipRules, "the plan names ownership (own, lend or reclaim_for_preference), which %v does not implement; ownership needs rules v%d or later", RulesOf(plan), int(RulesV3))
	}
	return nil
}

// satAdd adds without overflowing: sums of many maxed quantities saturate
// at Unlimited, which compares above every real quantity.
func satAdd(a, b Slots) Slots {
	if a > Unlimited-b {
		return Unlimited
	}
	return a + b
}
