package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestFlagsAndFormats(t *testing.T) {
	o := Defaults()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	AddFlags(fs, &o)
	if err := fs.Parse([]string{"--log-format", "json", "--log-level", "warn"}); err != nil {
		t.Fatal(err)
	}
	if o.Format != FormatJSON || o.Level != slog.LevelWarn {
		t.Fatalf("parsed %+v", o)
	}
	for _, bad := range [][]string{{"--log-format", "xml"}, {"--log-level", "loud"}} {
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		o := Defaults()
		AddFlags(fs, &o)
		if err := fs.Parse(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	var buf bytes.Buffer
	l, err := New(&buf, o)
	if err != nil {
		t.Fatal(err)
	}
	l.Info("dropped")
	l.Warn("kept", "k", 1)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line (info dropped at warn), got %q", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["msg"] != "kept" || rec["level"] != "WARN" || rec["time"] == nil || rec["k"] != 1.0 {
		t.Errorf("record %v", rec)
	}
}

// A writer of plain lines (pgcluster's) becomes one record per line, a
// line split across writes included.
func TestLines(t *testing.T) {
	var buf bytes.Buffer
	l, _ := New(&buf, Options{Format: FormatJSON})
	w := Lines(l, slog.LevelInfo, "component", "postgres")
	_, _ = w.Write([]byte("first line\nsecond "))
	_, _ = w.Write([]byte("line\n\n"))
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if rec["component"] != "postgres" {
			t.Errorf("record %v lacks the attribute", rec)
		}
		msgs = append(msgs, rec["msg"].(string))
	}
	if strings.Join(msgs, "|") != "first line|second line" {
		t.Errorf("messages %q", msgs)
	}
}
