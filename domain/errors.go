package domain

import (
	"errors"
	"fmt"
)

// Refusal reasons. Apply wraps one of these with the specifics (which
// consumer, which host, which numbers); callers match with errors.Is.
var (
	ErrNoPlan           = errors.New("pool has no plan yet")
	ErrUnknownConsumer  = errors.New("unknown consumer")
	ErrDemandOnParent   = errors.New("consumer is a parent; only leaves hold demand")
	ErrNegativeSlots    = errors.New("slots must not be negative")
	ErrNonPositive      = errors.New("slots must be positive")
	ErrReleaseTooMany   = errors.New("release of more slots than are held")
	ErrUnknownHost      = errors.New("unknown host")
	ErrHostAlreadyUp    = errors.New("host is already up")
	ErrHostAlreadyDown  = errors.New("host is already down")
	ErrInvalidPlan      = errors.New("invalid plan")
	ErrInvalidPath      = errors.New("invalid consumer path")
	ErrDuplicatePath    = errors.New("duplicate consumer path")
	ErrZeroShare        = errors.New("share must be a positive integer")
	ErrPercentRange     = errors.New("max percentage out of range 1..100")
	ErrOverflow         = errors.New("quantity too large")
	ErrEmptyEvent       = errors.New("event has nothing to do")
	ErrInvalidHost      = errors.New("invalid host")
	ErrUnknownEventType = errors.New("unknown event type")
	ErrSeqOrder         = errors.New("event sequence must increase")
)

func refuse(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
