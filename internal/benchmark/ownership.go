package benchmark

import (
	"context"
	"fmt"

	"github.com/cluster-ledger/ledger/events"
)

// ownership is phase 6: the projector on a pool with ownership by group
// (ownedSetup: the benchmark pool's tree, a quarter of its leaves owning
// slots of a host group) beside the same projector on the plain pool,
// each log of the same length on a fresh stream, into a fresh database,
// as deployed.
func (b *bench) ownership(ctx context.Context) error {
	n := b.n.ownershipEvents
	rates := map[string]float64{}
	details := map[string]string{}
	for _, w := range []struct {
		name  string
		setup []events.Payload
	}{{"plain", setup()}, {"owned", ownedSetup()}} {
		url, js, stop, err := b.freshStream(ctx, "nats-ownership-"+w.name)
		if err != nil {
			return err
		}
		b.progress("writing %d events of the %s pool to a fresh stream", n, w.name)
		st, err := b.writeLogTo(ctx, js, "own-"+w.name+"-"+b.runID, w.setup, 6, n)
		if err != nil {
			stop()
			return err
		}
		b.progress("  %s", st.written(b.signer != nil, true))
		rate, err := b.projectWith(ctx, url, "own-"+w.name, partitionSetup{name: w.name}, uint64(st.events))
		stop()
		if err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		rates[w.name] = rate
		details[w.name] = fmt.Sprintf("%d events, fresh stream and database", st.events)
	}
	b.add(Result{Phase: "6 ownership", Name: "projector, plain pool", Signing: b.signing(), Value: rates["plain"], Unit: "events/s",
		Detail: details["plain"] + " (the baseline)"})
	b.add(Result{Phase: "6 ownership", Name: "projector, pool with ownership by group", Signing: b.signing(), Value: rates["owned"], Unit: "events/s",
		Baseline: "plain pool", BaselineValue: rates["plain"], Target: "≥ 0.5", Min: 0.5,
		Detail: details["owned"] + "; 250 of 1,000 leaves own slots of one of 4 host groups, their teams and departments the groups' slots above them (rules 3)"})
	return nil
}
