// Package producer is a site's scheduler reporting to the ledger: it
// declares its plan and hosts, reports demand and releases, and reads
// what it was given, with the ledger's public client library.
package producer

import (
	"context"
	"errors"
	"fmt"

	"github.com/cluster-ledger/ledger/client"
	"github.com/cluster-ledger/ledger/events"
)

// Scheduler reports one pool's demand with its own tokens: the planner's
// (plan scope) for the plan and the hosts, its own (append scope) for
// demand and releases.
type Scheduler struct {
	Pool    string
	Planner *client.Client
	Jobs    *client.Client
}

// Declare sends the plan and the hosts as one atomic batch.
func (s *Scheduler) Declare(ctx context.Context, teams map[string]int64, hosts map[string]int64) error {
	var cs []events.Consumer
	for path, share := range teams {
		cs = append(cs, events.Consumer{Path: path, Share: &share})
	}
	plan, err := client.NewEvent(&events.PlanChange{Plan: events.Plan{Policy: events.Policy{Reclaim: events.ReclaimShareRatio}, Consumers: cs}})
	if err != nil {
		return err
	}
	evs := []client.Event{plan}
	for name, slots := range hosts {
		ev, err := client.NewEvent(&events.HostUp{Host: name, Slots: slots})
		if err != nil {
			return err
		}
		evs = append(evs, ev)
	}
	_, err = s.Planner.Append(ctx, s.Pool, evs...)
	return err
}

// Want reports a team's demand under the job's own id, so that a retry
// after a crash is stored once.
func (s *Scheduler) Want(ctx context.Context, jobID, team string, slots int64) (client.Appended, error) {
	ev, err := client.NewEvent(&events.Demand{Demands: map[string]int64{team: slots}})
	if err != nil {
		return client.Appended{}, err
	}
	res, err := s.Jobs.Append(ctx, s.Pool, ev.WithID(jobID))
	if errors.Is(err, client.CodeUnknownConsumer) {
		return client.Appended{}, fmt.Errorf("team %s is not in the plan of pool %s: %w", team, s.Pool, err)
	}
	if err != nil {
		return client.Appended{}, err
	}
	return res[0], nil
}
