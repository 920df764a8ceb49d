package domain

import (
	"fmt"

	"github.com/cluster-ledger/ledger/events"
)

// Refusal reasons, each with its stable code (the hash chain records the
// code, the API answers with it). Apply wraps one of these with the
// specifics (which consumer, which host, which numbers); callers match
// with errors.Is and read the code with events.CodeOf. A code, once
// released, never changes meaning.
var (
	ErrNoPlan           = events.NewRefusal("no_plan", "pool has no plan yet")
	ErrUnknownConsumer  = events.NewRefusal("unknown_consumer", "unknown consumer")
	ErrDemandOnParent   = events.NewRefusal("demand_on_parent", "consumer is a parent; only leaves hold demand")
	ErrNegativeSlots    = events.NewRefusal("negative_slots", "slots must not be negative")
	ErrNonPositive      = events.NewRefusal("non_positive_slots", "slots must be positive")
	ErrReleaseTooMany   = events.NewRefusal("release_too_many", "release of more slots than are held")
	ErrUnknownHost      = events.NewRefusal("unknown_host", "unknown host")
	ErrHostAlreadyUp    = events.NewRefusal("host_already_up", "host is already up")
	ErrHostAlreadyDown  = events.NewRefusal("host_already_down", "host is already down")
	ErrInvalidPlan      = events.NewRefusal("invalid_plan", "invalid plan")
	ErrUnknownRules     = events.NewRefusal("unknown_rules_version", "unknown rules version")
	ErrInvalidPath      = events.NewRefusal("invalid_path", "invalid consumer path")
	ErrDuplicatePath    = events.NewRefusal("duplicate_path", "duplicate consumer path")
	ErrZeroShare        = events.NewRefusal("invalid_share", "share must be a positive integer")
	ErrPercentRange     = events.NewRefusal("percent_range", "max percentage out of range 1..100")
	ErrOverflow         = events.NewRefusal("overflow", "quantity too large")
	ErrEmptyEvent       = events.NewRefusal("empty_event", "event has nothing to do")
	ErrInvalidHost      = events.NewRefusal("invalid_host", "invalid host")
	ErrUnknownEventType = events.NewRefusal("unknown_type", "unknown event type")
	ErrSeqOrder         = events.NewRefusal("seq_order", "event sequence must increase")

	// Ownership (docs/rules.md#ownership; see ownership_plan.go).
	ErrInvalidOwnEntry   = events.NewRefusal("invalid_own_entry", "an own entry must be exactly one of {host}, {host, slots}, {group, slots}")
	ErrPreferenceRange   = events.NewRefusal("preference_range", "own preference out of range 1..10")
	ErrDuplicateOwnHost  = events.NewRefusal("duplicate_own_host", "the same host twice in one consumer's own list")
	ErrParentOwnsNothing = events.NewRefusal("parent_owns_nothing", "a child owns resources while its parent owns nothing")
	ErrChildrenOwnMore   = events.NewRefusal("children_own_more", "children own more than their parent")
	ErrOwnershipRules    = events.NewRefusal("ownership_unsupported_rules", "ownership is not part of the plan's rules version")

	// Rules version 4's plan fields (yarn.go).
	ErrUnsupportedWithOwnership = events.NewRefusal("unsupported_with_ownership", "priority_bands, preemptable and zero shares are not defined with ownership")
)

func refuse(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
