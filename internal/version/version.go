package version

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Unknown stands for what the build did not record.
const Unknown = "unknown"

// Info is what the build recorded.
type Info struct {
	Version    string // module version, or "(devel)"
	Commit     string // VCS revision, or Unknown
	CommitTime string // its time (RFC 3339), or ""
	Modified   bool   // the tree had uncommitted changes
	GoVersion  string
}

// Get reads the running binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "(devel)", Commit: Unknown, GoVersion: Unknown}
	}
	return fromBuildInfo(bi)
}

func fromBuildInfo(bi *debug.BuildInfo) Info {
	in := Info{Version: bi.Main.Version, Commit: Unknown, GoVersion: bi.GoVersion}
	if in.Version == "" {
		in.Version = "(devel)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				in.Commit = s.Value
			}
		case "vcs.time":
			in.CommitTime = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// String is what `--version` prints after the program's name:
//
//	(devel)
//	commit: 4f1c0e2... (modified)
//	commit time: 2026-11-26T21:40:00Z
//	go: go1.26.0
func (in Info) String() string {
	var b strings.Builder
	b.WriteString(in.Version + "\n")
	commit := in.Commit
	if in.Modified {
		commit += " (modified)"
	}
	fmt.Fprintf(&b, "commit: %s\n", commit)
	if in.CommitTime != "" {
		fmt.Fprintf(&b, "commit time: %s\n", in.CommitTime)
	}
	fmt.Fprintf(&b, "go: %s\n", in.GoVersion)
	return b.String()
}
