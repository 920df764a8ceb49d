package contract

import (
	"bytes"
	"net/http"
	"strings"
)

// Handler wraps h so that c checks every answer h gives. An event stream
// (text/event-stream) is checked when its head is written, with no body:
// it ends only when the client or the server does.
func (c *Checker) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{ResponseWriter: w, c: c, r: r}
		h.ServeHTTP(rec, r)
		if rec.status == 0 && r.Context().Err() != nil {
			return // the client went away and the handler answered nothing
		}
		if !rec.streaming {
			if rec.status == 0 {
				rec.status = http.StatusOK
			}
			c.Check(r, rec.status, w.Header(), rec.body.Bytes())
		}
	})
}

// recorder passes an answer through and keeps a copy of it.
type recorder struct {
	http.ResponseWriter
	c         *Checker
	r         *http.Request
	status    int
	streaming bool
	body      bytes.Buffer
}

func (rec *recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			rec.streaming = true
			rec.c.Check(rec.r, status, rec.Header().Clone(), nil)
		}
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *recorder) Write(b []byte) (int, error) {
	if rec.status == 0 {
		rec.WriteHeader(http.StatusOK)
	}
	if !rec.streaming && rec.body.Len() < maxChecked {
		rec.body.Write(b)
	}
	return rec.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer's Flush (the live
// stream flushes through it).
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }
