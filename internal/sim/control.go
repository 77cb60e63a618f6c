package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
)

// Handler is the control endpoint:
//
//	GET  /status                 the Status as JSON
//	POST /pause?node=N|zone=Z    stop heartbeats (with zone, &count=K: only
//	                             the zone's first K nodes by index)
//	POST /resume?node=N|zone=Z   resume them
//	POST /shutdown?node=N|zone=Z graceful node shutdown, then down
//	POST /boot?node=N|zone=Z     start shut-down nodes again
//	POST /reset                  start a new measuring window
//	GET  /debug/pprof/...        Go profiles of the simulator itself
func (s *Sim) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Status())
	})
	action := func(do func(Selector) int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			sel := Selector{Node: q.Get("node"), Zone: q.Get("zone")}
			if (sel.Node == "") == (sel.Zone == "") {
				http.Error(w, "give exactly one of ?node= or ?zone=", http.StatusBadRequest)
				return
			}
			if c := q.Get("count"); c != "" {
				n, err := strconv.Atoi(c)
				if err != nil || n <= 0 || sel.Zone == "" {
					http.Error(w, fmt.Sprintf("?count=%q: want a positive number of nodes, with ?zone=", c), http.StatusBadRequest)
					return
				}
				sel.Count = n
			}
			n := do(sel)
			if n == 0 {
				http.Error(w, "no simulated node matches (or none is in a state this applies to)", http.StatusNotFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]int{"nodes": n})
		}
	}
	mux.HandleFunc("POST /pause", action(func(sel Selector) int { return s.SetPaused(sel, true) }))
	mux.HandleFunc("POST /resume", action(func(sel Selector) int { return s.SetPaused(sel, false) }))
	mux.HandleFunc("POST /shutdown", action(s.Shutdown))
	mux.HandleFunc("POST /boot", action(s.Boot))
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
//	pause|resume|shutdown|boot node N | pause|resume|shutdown|boot zone Z | status | reset
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
		case len(f) == 3 && (f[1] == "node" || f[1] == "zone") && (f[0] == "pause" || f[0] == "resume" || f[0] == "shutdown" || f[0] == "boot"):
			sel := Selector{Node: f[2]}
			if f[1] == "zone" {
				sel = Selector{Zone: f[2]}
			}
			switch f[0] {
			case "pause", "resume":
				fmt.Fprintf(out, "%sd %d node(s)\n", f[0], s.SetPaused(sel, f[0] == "pause"))
			case "shutdown":
				fmt.Fprintf(out, "shutting down %d node(s)\n", s.Shutdown(sel))
			case "boot":
				fmt.Fprintf(out, "booted %d node(s)\n", s.Boot(sel))
			}
		case f[0] == "status" && len(f) == 1:
			b, _ := json.Marshal(s.Status())
			fmt.Fprintf(out, "%s\n", b)
		case f[0] == "reset" && len(f) == 1:
			s.ResetStats()
			fmt.Fprintln(out, "stats reset")
		default:
			fmt.Fprintf(out, "unknown command %q; want: pause|resume|shutdown|boot node N | pause|resume|shutdown|boot zone Z | status | reset\n", sc.Text())
		}
	}
}
