package benchmark

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Report is what a run measured.
type Report struct {
	Quick bool `json:"quick"`
	// Signed: the ledger ran as deployed, the API signing every event and
	// every reader checking the signatures against the trusted keys; the
	// results marked unsigned ran without keys, for comparison.
	Signed       bool        `json:"signed"`
	CPUs         int         `json:"cpus"`
	GoVersion    string      `json:"go_version"`
	NATS         string      `json:"nats"`
	Postgres     string      `json:"postgres"`
	TempDir      string      `json:"temp_dir,omitempty"`
	Results      []Result    `json:"results"`
	Phases       []PhaseTime `json:"phases"`
	TotalSeconds float64     `json:"total_seconds"`
	Notes        []string    `json:"notes,omitempty"`
}

// Result is one figure. A figure measured against a raw baseline of the
// same run names it (Baseline, BaselineValue) and carries Value over it
// (Ratio). Target, when set, is met when the ratio (or, without a
// baseline, the value) is at least Min, or at most Max when Max is set;
// Above makes "at least" strict.
type Result struct {
	Phase string  `json:"phase"`
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Signing is "signed" (as deployed), "unsigned" (for comparison) or
	// "" (no ledger code involved: a raw baseline).
	Signing       string  `json:"signing,omitempty"`
	Baseline      string  `json:"baseline,omitempty"`
	BaselineValue float64 `json:"baseline_value,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"`
	Detail        string  `json:"detail,omitempty"`
	Target        string  `json:"target,omitempty"`
	Min           float64 `json:"-"`
	Max           float64 `json:"-"`
	Above         bool    `json:"-"`
	Met           *bool   `json:"met,omitempty"`
}

// PhaseTime is how long a phase took, setup included.
type PhaseTime struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
}

func (b *bench) add(r Result) {
	checked := r.Value
	if r.Baseline != "" && r.BaselineValue > 0 {
		r.Ratio = r.Value / r.BaselineValue
		checked = r.Ratio
	}
	if r.Target != "" {
		met := checked >= r.Min
		switch {
		case r.Max > 0:
			met = checked <= r.Max
		case r.Above:
			met = checked > r.Min
		}
		r.Met = &met
	}
	b.report.Results = append(b.report.Results, r)
}

// signing is the Signing of the run's ledger figures.
func (b *bench) signing() string {
	if b.signer != nil {
		return "signed"
	}
	return "unsigned"
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report as a table, results in phase order, then
// the time each phase took.
func (r *Report) WriteTable(w io.Writer) error {
	mode := "default sizes"
	if r.Quick {
		mode = "--quick"
	}
	fmt.Fprintf(w, "ledger bench (%s): %d CPUs, %s; NATS %s; %s\n", mode, r.CPUs, r.GoVersion, r.NATS, r.Postgres)
	if r.Signed {
		fmt.Fprintln(w, "signed, as deployed: the API signs every event (Ed25519), the projector and the readers check every signature against the trusted keys; rows marked unsigned ran without keys, for comparison")
	} else {
		fmt.Fprintln(w, "UNSIGNED (--unsigned): no signing key, no trusted keys; a deployed ledger signs, so these figures are higher than it reaches")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tMEASURE\tSIGNING\tVALUE\tUNIT\tBASELINE (same run)\tRATIO\tTARGET\tDETAIL")
	for _, ph := range phaseNames {
		for _, res := range r.Results {
			if res.Phase != ph {
				continue
			}
			target := res.Target
			if res.Met != nil {
				if *res.Met {
					target += " ok"
				} else {
					target += " MISSED"
				}
			}
			base, ratio := "", ""
			if res.Baseline != "" {
				base = fmt.Sprintf("%s: %s", res.Baseline, formatValue(res.BaselineValue, res.Unit))
				ratio = strconv.FormatFloat(res.Ratio, 'f', 2, 64)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", res.Phase, res.Name, res.Signing, formatValue(res.Value, res.Unit), res.Unit,
				base, ratio, target, res.Detail)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	var parts []string
	for _, p := range r.Phases {
		parts = append(parts, fmt.Sprintf("%s %.1fs", p.Phase, p.Seconds))
	}
	fmt.Fprintf(w, "elapsed: %s; total %.1fs\n", strings.Join(parts, ", "), r.TotalSeconds)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return nil
}

// phaseNames are the phases in the order the table prints them.
var phaseNames = []string{"1 append", "2 projection", "3 latency", "4 replay", "5 partitions", "6 ownership"}

// formatValue prints rates as whole numbers with thousands separators,
// ratios with two decimals, times with one or two.
func formatValue(v float64, unit string) string {
	switch {
	case unit == "×" || unit == "ratio":
		return strconv.FormatFloat(v, 'f', 2, 64)
	case unit == "ms" && v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	case unit == "ms" || unit == "s":
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return thousands(int64(math.Round(v)))
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}
