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
	Quick        bool        `json:"quick"`
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

// Result is one figure. Target, when set, is met when Value >= Min.
type Result struct {
	Phase  string  `json:"phase"`
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Detail string  `json:"detail,omitempty"`
	Target string  `json:"target,omitempty"`
	Min    float64 `json:"-"`
	Met    *bool   `json:"met,omitempty"`
}

// PhaseTime is how long a phase took, setup included.
type PhaseTime struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"seconds"`
}

func (b *bench) add(r Result) {
	if r.Target != "" {
		met := r.Value >= r.Min
		r.Met = &met
	}
	b.report.Results = append(b.report.Results, r)
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
	fmt.Fprintf(w, "ledger bench (%s): %d CPUs, %s; NATS %s; %s\n\n", mode, r.CPUs, r.GoVersion, r.NATS, r.Postgres)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PHASE\tMEASURE\tVALUE\tUNIT\tTARGET\tDETAIL")
	for _, ph := range []string{"1 append", "2 projection", "3 latency", "4 replay", "5 partitions"} {
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
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", res.Phase, res.Name, formatValue(res.Value, res.Unit), res.Unit, target, res.Detail)
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
