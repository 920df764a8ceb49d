package api

import "testing"

// HoldWhatIfSlots takes the slot of a what-if of pool, as a running one
// of token does, until the returned function is called (TestWhatIfSlots).
func (s *Server) HoldWhatIfSlots(t testing.TB, pool, token string) (release func()) {
	t.Helper()
	release, ok := s.whatIf.acquire(pool, token)
	if !ok {
		t.Fatalf("no what-if slot free for pool %s", pool)
	}
	return release
}

// Resident reports whether the server holds a view of pool in memory.
func (s *Server) Resident(pool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pools[pool]
	return ok
}
