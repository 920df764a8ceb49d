package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync"

	"github.com/spf13/pflag"
)

// Formats of --log-format.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Options are the logging flags of a process.
type Options struct {
	Format string     // FormatText or FormatJSON
	Level  slog.Level // records below it are dropped
}

// Defaults: text, info.
func Defaults() Options { return Options{Format: FormatText, Level: slog.LevelInfo} }

// AddFlags registers --log-format and --log-level on fs, writing into o
// (which should hold Defaults()).
func AddFlags(fs *pflag.FlagSet, o *Options) {
	fs.Var((*formatValue)(&o.Format), "log-format", "how log lines are written: text (key=value) or json (one object a line: time, level, msg, ...)")
	fs.Var((*levelValue)(&o.Level), "log-level", "least severe level logged: debug, info, warn or error")
}

// New returns the logger writing to w as o says.
func New(w io.Writer, o Options) (*slog.Logger, error) {
	ho := &slog.HandlerOptions{Level: o.Level}
	switch o.Format {
	case FormatText, "":
		return slog.New(slog.NewTextHandler(w, ho)), nil
	case FormatJSON:
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return nil, fmt.Errorf("log format %q: want %s or %s", o.Format, FormatText, FormatJSON)
}

type formatValue string

func (f *formatValue) String() string { return string(*f) }
func (f *formatValue) Type() string   { return "text|json" }
func (f *formatValue) Set(s string) error {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case FormatText, FormatJSON:
		*f = formatValue(s)
		return nil
	}
	return fmt.Errorf("want %s or %s", FormatText, FormatJSON)
}

type levelValue slog.Level

func (l *levelValue) String() string { return strings.ToLower(slog.Level(*l).String()) }
func (l *levelValue) Type() string   { return "level" }
func (l *levelValue) Set(s string) error {
	var lv slog.Level
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		lv = slog.LevelDebug
	case "info":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return fmt.Errorf("want debug, info, warn or error")
	}
	*l = levelValue(lv)
	return nil
}

// ServerErrors is the ErrorLog of an http.Server logging through l: the
// errors net/http reports itself (a TLS handshake that failed, a
// connection it could not accept, a handler's panic) become warn records
// with component=http in the process's format, instead of plain lines
// of the standard log package on stderr.
func ServerErrors(l *slog.Logger) *log.Logger {
	return slog.NewLogLogger(l.Handler().WithAttrs([]slog.Attr{slog.String("component", "http")}), slog.LevelWarn)
}

// Lines returns a writer that logs each line written to it as one record
// at level with the line as its message: the output of a part that
// writes plain lines (the private PostgreSQL's pgcluster) joins the
// process's log in its format. Safe for concurrent use; a line longer
// than 64 KiB is cut.
func Lines(l *slog.Logger, level slog.Level, attrs ...any) io.Writer {
	return &lineWriter{log: l, level: level, attrs: attrs}
}

type lineWriter struct {
	mu    sync.Mutex
	log   *slog.Logger
	level slog.Level
	attrs []any
	buf   bytes.Buffer
}

const maxLine = 64 << 10

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			if w.buf.Len() > maxLine {
				w.emit(w.buf.Next(maxLine))
			}
			return len(p), nil
		}
		w.emit(w.buf.Next(i + 1))
	}
}

func (w *lineWriter) emit(line []byte) {
	if s := strings.TrimSpace(string(line)); s != "" {
		w.log.Log(context.Background(), w.level, s, w.attrs...)
	}
}
