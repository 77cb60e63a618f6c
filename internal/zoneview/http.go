package zoneview

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeplane/nodeplane/internal/apiserver/authn"
)

//go:embed static
var staticFiles embed.FS

// API serves ZonesPath and EventsPath. It must sit behind the server's
// authentication and authorization.
func (a *Aggregator) API() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(ZonesPath, a.serveZones)
	mux.HandleFunc(EventsPath, a.serveEvents)
	mux.HandleFunc(APIPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	})
	return mux
}

func (a *Aggregator) serveZones(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	a.mu.Lock()
	body := a.snapshotLocked()
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// serveEvents streams the snapshot, then every new sample, as server-sent
// events, to at most MaxSubscribers streams and MaxPerUser per user (the
// user authn put on the request). Each write must finish within WriteTimeout, and a stream whose
// queue overflows is ended, so a reader that does not read costs one
// goroutine and Buffer samples until the next write deadline.
func (a *Aggregator) serveEvents(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	user := ""
	if u, ok := authn.UserFrom(r.Context()); ok {
		user = u.Name
	}
	sub, snapshot := a.subscribe(user)
	if sub == nil {
		w.Header().Set("Retry-After", "5")
		writeStatus(w, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, "too many zone view streams open, try again later")
		return
	}
	defer a.unsubscribe(sub)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(parts ...[]byte) bool {
		// Write deadlines are wall-clock deadlines on the connection.
		_ = rc.SetWriteDeadline(time.Now().Add(a.cfg.WriteTimeout))
		for _, p := range parts {
			if _, err := w.Write(p); err != nil {
				return false
			}
		}
		return rc.Flush() == nil
	}
	if !send([]byte("event: snapshot\ndata: "), snapshot, []byte("\n\n")) {
		return
	}
	keepAlive := a.cfg.Clock.NewTicker(a.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.gone:
			return
		case data := <-sub.ch:
			if !send([]byte("event: sample\ndata: "), data, []byte("\n\n")) {
				return
			}
		case <-keepAlive.C():
			if !send([]byte(": keep-alive\n\n")) {
				return
			}
		}
	}
}

func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	writeStatus(w, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, "the server does not allow this method on the requested resource")
	return false
}

func writeStatus(w http.ResponseWriter, code int32, reason metav1.StatusReason, msg string) {
	data, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(code))
	_, _ = w.Write(append(data, '\n'))
}

// Assets serves the page (index.html, app.js, app.css) under Prefix to
// anyone: the files are the same in every binary and hold no cluster data.
// The Content-Security-Policy admits only the page's own script, style and
// same-origin requests, and no framing.
func Assets() http.Handler {
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
