// Package auth holds the ledger's API tokens: who may append to which
// pools, change plans and hosts, or read.
//
// A token is a random secret handed to one producer or reader once; the
// ledger keeps only its SHA-256 in a tokens file (JSON lines, one Entry a
// line, mode 0600), so the file can be read without giving anything away
// and a leaked file cannot be replayed. A presented token is hashed and
// compared with every entry in constant time. The entry's name is the
// identity the ledger records as the producer of the events it appends.
package auth
