// Package natsserver runs an embedded nats-server with JetStream enabled
// and its file store in a directory of the caller's choosing, so that
// `ledger dev` and tests need no external NATS. [Start] returns once the
// server accepts connections (within [WithReadyTimeout], 10s by default);
// a later Start with the same [WithStoreDir] finds the streams and
// messages of the previous run. The server is silent unless
// [WithLogging](true), and it installs no signal handlers (the embedding
// program owns SIGINT/SIGTERM). JetStream syncs every write to disk
// before it acknowledges it ([SyncAlways], the default; [WithSync] and
// [ParseSync] choose a background interval instead, which is faster but
// may lose acknowledged writes in a power loss).
//
// A server with [WithUsers] closes a client connection that has not
// authenticated within [DefaultAuthTimeout]: each counts against
// max_connections ([DefaultMaxConns]) from its accept, so a
// connection without credentials holds a slot that long at most. Each
// user holds at most its [User.MaxConnections] at once, so no identity's
// connections can take the slots of another.
//
// A server may be a member of a JetStream cluster ([WithCluster]); its
// routes are then always authenticated ([WithRouteAuth]; a route without
// the credentials is refused). [StartCluster] runs a whole cluster in
// this process on loopback (`ledger dev --nats-cluster 3`, tests): it
// waits for JetStream's meta leader, and [Cluster.Restart] brings a
// member back on its store and ports.
//
// Errors match [ErrNoStoreDir], [ErrBadListen], [ErrBadSync], [ErrStart],
// [ErrNotReady], [ErrNoRouteAuth], [ErrBadCluster] and [ErrBadUsers] with errors.Is.
package natsserver
