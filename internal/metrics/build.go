package metrics

import (
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildInfo is ledger_build_info: 1, labelled with what was built. A
// dashboard joins on it to show which version each process runs, and a
// rollout is seen as the labels change. From the binary's own build
// information (runtime/debug): the module version ("(devel)" for a
// local build), the VCS revision when the build recorded one ("unknown"
// otherwise, e.g. -buildvcs=false) and the Go version.
func buildInfo() prometheus.Collector {
	version, commit, goVersion := "unknown", "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				commit = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "ledger_build_info",
		Help:        "1, labelled with the running binary's version, VCS commit and Go version (runtime/debug build information).",
		ConstLabels: prometheus.Labels{"version": version, "commit": commit, "go_version": goVersion},
	})
	g.Set(1)
	return g
}
