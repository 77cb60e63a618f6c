// Package trace stands in for golang.org/x/net/trace in nodeplane's release
// builds (see ../README.md and scripts/release-overlay.sh).
//
// The real package renders its pages with html/template, whose reflection
// (a method looked up by a name known only at run time) makes the Go linker
// keep every exported method of every type in the binary. In nodeplane the
// only callers are etcd's /debug/requests and /debug/events pages, which
// etcd serves only at its debug log level; nodeplane runs etcd at warn, so
// they are never served. This stand-in keeps the two entry points etcd
// calls and answers 404.
package trace

import (
	"io"
	"net/http"
)

const notBuilt = "request tracing is not built into this nodeplane binary\n"

// Render would list the active and recent request traces.
func Render(w io.Writer, _ *http.Request, _ bool) {
	if rw, ok := w.(http.ResponseWriter); ok {
		http.Error(rw, notBuilt, http.StatusNotFound)
		return
	}
	_, _ = io.WriteString(w, notBuilt)
}

// RenderEvents would list the event logs.
func RenderEvents(w http.ResponseWriter, _ *http.Request, _ bool) {
	http.Error(w, notBuilt, http.StatusNotFound)
}
