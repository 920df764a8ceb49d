package events

// Demand sets absolute demand levels (held slots included) for leaf
// consumers. All entries are simultaneous: they are one event.
type Demand struct {
	Demands map[string]int64 `json:"demands"`
}

// Release returns slots a leaf holds (its work finished): its allocation and
// its demand both drop by Slots.
type Release struct {
	Consumer string `json:"consumer"`
	Slots    int64  `json:"slots"`
}

// PlanChange replaces the pool's plan: policy and consumer tree.
type PlanChange struct {
	Plan Plan `json:"plan"`
}

// HostUp registers a new host or brings a down one back, with no
// allocations on it.
type HostUp struct {
	Host  string `json:"host"`
	Group string `json:"group,omitempty"`
	Slots int64  `json:"slots"`
}

// HostDown takes a host out of the pool; every slot on it is lost.
type HostDown struct {
	Host string `json:"host"`
}

func (*Demand) EventType() Type     { return TypeDemand }
func (*Release) EventType() Type    { return TypeRelease }
func (*PlanChange) EventType() Type { return TypePlan }
func (*HostUp) EventType() Type     { return TypeHostUp }
func (*HostDown) EventType() Type   { return TypeHostDown }
