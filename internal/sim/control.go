package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strings"
)

// Handler is the control endpoint:
//
//	GET  /status                 the Status as JSON
//	POST /pause?node=N|zone=Z    stop heartbeats
//	POST /resume?node=N|zone=Z   resume them
//	POST /reset                  start a new measuring window
//	GET  /debug/pprof/...        Go profiles of the simulator itself
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Status())
	})
	pause := func(paused bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			sel := Selector{Node: r.URL.Query().Get("node"), Zone: r.URL.Query().Get("zone")}
			if (sel.Node == "") == (sel.Zone == "") {
				http.Error(w, "give exactly one of ?node= or ?zone=", http.StatusBadRequest)
				return
			}
			n := s.SetPaused(sel, paused)
			if n == 0 {
				http.Error(w, "no simulated node matches", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]int{"nodes": n})
		}
	}
	mux.HandleFunc("POST /pause", pause(true))
	mux.HandleFunc("POST /resume", pause(false))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		s.ResetStats()
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

// Commands reads control commands, one per line, until in ends:
//
//	pause node N | pause zone Z | resume node N | resume zone Z | status | reset
//
// and writes each answer to out.
func (s *Sim) Commands(in io.Reader, out io.Writer) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case (f[0] == "pause" || f[0] == "resume") && len(f) == 3 && (f[1] == "node" || f[1] == "zone"):
			sel := Selector{Node: f[2]}
			if f[1] == "zone" {
				sel = Selector{Zone: f[2]}
			}
			n := s.SetPaused(sel, f[0] == "pause")
			fmt.Fprintf(out, "%sd %d node(s)\n", f[0], n)
		case f[0] == "status" && len(f) == 1:
			b, _ := json.Marshal(s.Status())
			fmt.Fprintf(out, "%s\n", b)
		case f[0] == "reset" && len(f) == 1:
			s.ResetStats()
			fmt.Fprintln(out, "stats reset")
		default:
			fmt.Fprintf(out, "unknown command %q; want: pause node N | pause zone Z | resume node N | resume zone Z | status | reset\n", sc.Text())
		}
	}
}
