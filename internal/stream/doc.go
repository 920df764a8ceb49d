// Package stream is the contract of the LEDGER JetStream stream: its name,
// its subjects (published on ledger.<pool>.<type>, stored on
// ledger.<pool>.<type>.<partition> by the stream's own partition()
// mapping, partitions.go), its configuration (file storage, no
// age limit, deletes and purges denied, a duplicate window, atomic batch
// publish, direct gets), how a stored message becomes an event with its
// offset, and how every reader reads a range of it ([Read]: batched direct
// gets, no consumer; [Last] and [Next] from the stream leader).
// The ledger (write side), the projector and the audit tools all use it,
// so they cannot disagree on where the log is.
package stream
