package console

import (
	"embed"
	"io/fs"
	"net/http"
)

// assets is the page: HTML, CSS and JavaScript, no build step.
//
//go:embed assets
var assets embed.FS

// assetHandler serves the page's files. They carry no data, so they are
// served without authentication; the browser revalidates them (no-cache)
// so a new binary's page is picked up at once.
func assetHandler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// frame-ancestors 'none': no other page may frame the console
		// (the API sets it and X-Frame-Options on every answer too).
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		files.ServeHTTP(w, r)
	})
}
