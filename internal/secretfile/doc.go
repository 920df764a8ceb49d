// Package secretfile writes the files that hold secrets (signing keys,
// NATS seeds): readable by their owner only, and never over an existing
// file, so a key in use cannot be replaced by accident.
package secretfile
