// Package version says which build of the ledger is running, from the
// binary's own build information (runtime/debug.ReadBuildInfo): the
// module version ("v1.2.3" when built with `go install ...@v1.2.3`; for a
// build of a clone what the go command derives from git: the tag at HEAD
// or a pseudo-version naming the commit; "(devel)" when the build
// recorded no VCS information), the VCS commit `go build` stamps in a
// clone ("unknown" when it stamped none: -buildvcs=false, a source tree
// without its .git, a git worktree), whether the tree
// had changes not committed, and the Go version. Nothing is injected at
// link time, so every way of building tells the truth about itself.
package version
