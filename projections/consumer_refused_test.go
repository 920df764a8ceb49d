package projections

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/testenv"
)

// TestConsumerTheIdentityMayNotManageIsNamed: a projector started, as
// the projector identity, with a --name (or a partition count) the
// identity's NATS permissions do not cover used to retry "delete
// consumer X: context deadline exceeded" forever; each retry now says
// that NATS refuses the identity that consumer and what to do
// (decision 506).
func TestConsumerTheIdentityMayNotManageIsNamed(t *testing.T) {
	js := connectNATS(t, testenv.NATS(t))
	for _, c := range []struct {
		name     string
		opts     []Option
		consumer string
	}{
		{"unpartitioned", []Option{WithName("elsewhere")}, "elsewhere"},
		{"partitioned", []Option{WithName("elsewhere"), WithPartition(1, 4)}, "elsewhere-p1of4"},
		{"too many partitions", []Option{WithPartition(3, 40)}, "projector-p3of40"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			var logs strings.Builder
			w := &lockedWriter{w: &logs}
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
			defer cancel()
			_ = New(asProjector(t, js), db, append([]Option{WithLogger(newTextLogger(w))}, c.opts...)...).Run(ctx)
			w.mu.Lock()
			out := logs.String()
			w.mu.Unlock()
			want := "NATS refuses this identity the consumer " + c.consumer
			if n := strings.Count(out, want); n < 2 || !strings.Contains(out, "--projector-name") {
				t.Errorf("%d retries named the refusal (%q); log:\n%s", n, want, out)
			}
		})
	}
}
