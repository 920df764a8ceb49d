// Package pgdump renders every projection table as canonical text, one
// line per row in key order, without wall-clock columns, so two
// projections of the same log can be compared line by line (a rebuild
// against the live projection, a crashed-and-resumed projector against an
// uninterrupted one).
package pgdump
