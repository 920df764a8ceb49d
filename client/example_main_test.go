package client_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/cluster-ledger/ledger/internal/testenv"
	"github.com/cluster-ledger/ledger/internal/testservice"
)

// TestMain starts the ledger the examples talk to: embedded NATS, a
// PostgreSQL database, the projector and the API (internal/testservice),
// every answer checked against the API's OpenAPI description.
func TestMain(m *testing.M) { testenv.Main(m, startLedger) }

func startLedger() (func() error, error) {
	dir, err := os.MkdirTemp("", "ledger-client-examples-")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := testservice.New(ctx, dir, testservice.Config{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ledgerURL = s.URL
	producerToken, plannerToken, readerToken = s.Token(testservice.Producer), s.Token(testservice.Planner), s.Token(testservice.Reader)
	return func() error {
		err := s.Close()
		os.RemoveAll(dir)
		return err
	}, nil
}
