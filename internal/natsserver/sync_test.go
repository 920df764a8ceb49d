package natsserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestParseSync(t *testing.T) {
	for in, want := range map[string]Sync{
		"always":         SyncAlways,
		"interval:2m":    {Interval: 2 * time.Minute},
		"interval:250ms": {Interval: 250 * time.Millisecond},
	} {
		got, err := ParseSync(in)
		if err != nil || got != want {
			t.Errorf("ParseSync(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, _ := ParseSync(got.String()); back != got {
			t.Errorf("%q: String() %q does not parse back", in, got.String())
		}
	}
	for _, in := range []string{"", "Always", "interval", "interval:", "interval:0s", "interval:-1s", "interval:soon", "2m"} {
		if _, err := ParseSync(in); !errors.Is(err, ErrBadSync) {
			t.Errorf("ParseSync(%q): err = %v, want ErrBadSync", in, err)
		}
	}
}

// TestSyncPolicyReachesJetStream starts servers with each policy and reads
// back what JetStream runs with.
func TestSyncPolicyReachesJetStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		opts     []Option
		always   bool
		interval time.Duration
	}{
		{nil, true, 2 * time.Minute}, // the default is safe
		{[]Option{WithSync(Sync{Interval: 5 * time.Second})}, false, 5 * time.Second},
	} {
		s, err := Start(ctx, append([]Option{WithStoreDir(t.TempDir()), WithListen("127.0.0.1:-1")}, tc.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.NATS().JetStreamConfig()
		if cfg.SyncAlways != tc.always || cfg.SyncInterval != tc.interval || s.Sync().Always != tc.always {
			t.Errorf("JetStream runs with sync_always=%t interval=%v; want %t, %v", cfg.SyncAlways, cfg.SyncInterval, tc.always, tc.interval)
		}
		s.Shutdown()
	}
	if _, err := Start(ctx, WithStoreDir(t.TempDir()), WithSync(Sync{})); !errors.Is(err, ErrBadSync) {
		t.Errorf("Start with an empty policy: err = %v, want ErrBadSync", err)
	}
}
