package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	in := fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "4f1c0e2aa"}, {Key: "vcs.time", Value: "2026-11-26T21:40:00Z"}, {Key: "vcs.modified", Value: "true"}}})
	if got := in.String(); got != "v1.4.0\ncommit: 4f1c0e2aa (modified)\ncommit time: 2026-11-26T21:40:00Z\ngo: go1.26.0\n" {
		t.Errorf("got %q", got)
	}
	// A build that recorded nothing says so.
	in = fromBuildInfo(&debug.BuildInfo{GoVersion: "go1.26.0"})
	if got := in.String(); got != "(devel)\ncommit: unknown\ngo: go1.26.0\n" {
		t.Errorf("got %q", got)
	}
	if !strings.HasPrefix(Get().GoVersion, "go") {
		t.Errorf("the test binary's Go version: %q", Get().GoVersion)
	}
}
