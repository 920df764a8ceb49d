package domain

import (
	"github.com/cluster-ledger/ledger/events"
)

// Validate reports whether the pool would accept the payload now, without
// changing anything. The ledger calls it before appending an event.
func (p *Pool) Validate(payload events.Payload) error {
	_, err := p.validate(payload)
	return err
}

// validate checks a payload against the current state. For a plan it also
// returns the tree it built, so Apply does not build it twice.
func (p *Pool) validate(payload events.Payload) (*tree, error) {
	switch e := payload.(type) {
	case *events.Demand:
		return nil, p.validateDemand(e)
	case *events.Release:
		return nil, p.validateRelease(e)
	case *events.PlanChange:
		return buildTree(e.Plan, p.development)
	case *events.HostUp:
		return nil, p.validateHostUp(e)
	case *events.HostDown:
		return nil, p.validateHostDown(e)
	case nil:
		return nil, refuse(ErrEmptyEvent, "no payload")
	default:
		return nil, refuse(ErrUnknownEventType, "%T", payload)
	}
}

func (p *Pool) validateDemand(e *events.Demand) error {
	if !p.hasPlan {
		return refuse(ErrNoPlan, "demand needs a plan first")
	}
	if len(e.Demands) == 0 {
		return refuse(ErrEmptyEvent, "demand names no consumer")
	}
	for _, path := range demandPaths(e) { // the first bad entry in path order
		if _, err := p.leaf(path); err != nil {
			return err
		}
		if err := checkQuantity("demand of "+path, e.Demands[path]); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pool) validateRelease(e *events.Release) error {
	if !p.hasPlan {
		return refuse(ErrNoPlan, "release needs a plan first")
	}
	id, err := p.leaf(e.Consumer)
	if err != nil {
		return err
	}
	if e.Slots < 0 {
		return refuse(ErrNegativeSlots, "release of %d slots by %s", e.Slots, e.Consumer)
	}
	if e.Slots == 0 {
		return refuse(ErrNonPositive, "release of 0 slots by %s", e.Consumer)
	}
	if held := p.t.nodes[id].alloc; Slots(e.Slots) > held {
		return refuse(ErrReleaseTooMany, "%s releases %d slots but holds %d", e.Consumer, e.Slots, held)
	}
	return nil
}

func (p *Pool) validateHostUp(e *events.HostUp) error {
	if e.Host == "" {
		return refuse(ErrInvalidHost, "host_up without a host name")
	}
	if e.Slots <= 0 {
		return refuse(ErrNonPositive, "host %s with %d slots", e.Host, e.Slots)
	}
	if err := checkQuantity("slots of host "+e.Host, e.Slots); err != nil {
		return err
	}
	capacity := p.pub.capacity + Slots(e.Slots)
	if id, ok := p.hostByID[e.Host]; ok {
		if p.hosts[id].up {
			return refuse(ErrHostAlreadyUp, "%s", e.Host)
		}
	}
	if capacity > MaxQuantity {
		return refuse(ErrOverflow, "pool capacity would be %d slots (at most %d)", capacity, MaxQuantity)
	}
	return nil
}

func (p *Pool) validateHostDown(e *events.HostDown) error {
	id, ok := p.hostByID[e.Host]
	if !ok {
		return refuse(ErrUnknownHost, "%q", e.Host)
	}
	if !p.hosts[id].up {
		return refuse(ErrHostAlreadyDown, "%s", e.Host)
	}
	return nil
}

// leaf resolves a path that must name a leaf of the current plan.
func (p *Pool) leaf(path string) (int32, error) {
	id, ok := p.t.lookup(path)
	if !ok || id == 0 {
		return 0, refuse(ErrUnknownConsumer, "%q is not in the plan", path)
	}
	if !p.t.nodes[id].leaf {
		return 0, refuse(ErrDemandOnParent, "%s", path)
	}
	return id, nil
}
