// Package stream is the contract of the LEDGER JetStream stream: its name,
// its subjects (ledger.<pool>.<type>), its configuration (file storage, no
// age limit, deletes and purges denied, a duplicate window, atomic batch
// publish, direct gets), how a stored message becomes an event with its
// offset, and how every reader reads a range of it ([Read]: batched direct
// gets, no consumer; [Last] and [Next] from the stream leader).
// The ledger (write side), the projector and the audit tools all use it,
// so they cannot disagree on where the log is.
package stream
