package unrouted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Reasons of the answers.
const (
	ReasonNotFound         = "not_found"          // 404: no such endpoint
	ReasonMethodNotAllowed = "method_not_allowed" // 405: the endpoint takes other methods (Allow)
)

// Writer writes an error answer of the server's own shape.
type Writer func(w http.ResponseWriter, r *http.Request, status int, reason, msg string)

// JSON wraps h so that a 404 or 405 it answers as text (net/http's
// mux, http.Error, http.NotFound) is answered by write instead (nil:
// {"error","reason"}), naming the path, or the methods the path takes
// (net/http's Allow header, kept). Every other answer passes through
// untouched.
func JSON(h http.Handler, write Writer) http.Handler {
	if write == nil {
		write = Plain
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&textErrorWriter{ResponseWriter: w, r: r, write: write}, r)
	})
}

// Plain writes {"error","reason"}.
func Plain(w http.ResponseWriter, _ *http.Request, status int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Error  string `json:"error"`
		Reason string `json:"reason"`
	}{msg, reason})
}

// textErrorWriter replaces a 404 or 405 answered as text.
type textErrorWriter struct {
	http.ResponseWriter
	r        *http.Request
	write    Writer
	replaced bool // the handler's text is being dropped
	wrote    bool
}

func (t *textErrorWriter) WriteHeader(code int) {
	if code < 200 { // informational (103 Early Hints): not the answer
		t.ResponseWriter.WriteHeader(code)
		return
	}
	if t.wrote {
		return
	}
	t.wrote = true
	ct := t.Header().Get("Content-Type")
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) && (ct == "" || strings.HasPrefix(ct, "text/plain")) {
		t.replaced = true
		t.Header().Del("Content-Length")
		t.Header().Del("Content-Type")
		if code == http.StatusMethodNotAllowed {
			t.write(t.ResponseWriter, t.r, code, ReasonMethodNotAllowed,
				fmt.Sprintf("%s takes %s, not %s", t.r.URL.Path, t.Header().Get("Allow"), t.r.Method))
			return
		}
		t.write(t.ResponseWriter, t.r, code, ReasonNotFound, fmt.Sprintf("no endpoint %s %s", t.r.Method, t.r.URL.Path))
		return
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *textErrorWriter) Write(b []byte) (int, error) {
	if !t.wrote {
		t.WriteHeader(http.StatusOK)
	}
	if t.replaced {
		return len(b), nil
	}
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes of
// a live stream, deadlines).
func (t *textErrorWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }
