#!/usr/bin/env bash
# Benchmark: one `nodeplane server` and one `nodeplane sim --nodes N` on this
# machine. Prints the sim's final statistics (renewals/s vs target, p50/p99
# renew latency, late renewals) plus server CPU (over the measuring window)
# and RSS, and the sim's peak RSS. Usage: scripts/simbench.sh N [SECONDS]
set -euo pipefail
N=${1:?nodes}
SECS=${2:-120}
NP=${NP:-./bin/nodeplane}
[ -x "$NP" ] || { mkdir -p bin; CGO_ENABLED=0 go build -o bin/nodeplane ./cmd/nodeplane; NP=./bin/nodeplane; }
D=$(mktemp -d)
trap 'kill $SPID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"' EXIT
"$NP" server --data-dir "$D/s" --listen 127.0.0.1:0 >"$D/server.log" 2>&1 &
SPID=$!
for _ in $(seq 1 100); do [ -f "$D/s/admin.kubeconfig" ] && break; sleep 0.1; done
sleep 1
URL=$(awk '/server:/{print $2; exit}' "$D/s/admin.kubeconfig")
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
/usr/bin/time -v "$NP" sim --server "$URL" --token-file "$D/s/node-token" --nodes "$N" --zones a,b,c \
  --duration "${SECS}s" --report-interval 0 --stdin=false >"$D/sim.out" 2>"$D/sim.err" &
SIMPID=$!
until grep -q "nodes registered" "$D/sim.out" 2>/dev/null; do sleep 0.5; kill -0 $SIMPID 2>/dev/null || break; done
c0=$(ticks $SPID); t0=$(date +%s.%N)
wait $SIMPID || true
c1=$(ticks $SPID); t1=$(date +%s.%N)
rss=$(awk '/VmRSS/{print $2}' /proc/$SPID/status)
echo "nodes=$N window=${SECS}s"
grep '^final' "$D/sim.out"
echo "server: cpu $(echo "scale=2; ($c1-$c0)/100/($t1-$t0)" | bc) cores, RSS $((rss/1024)) MiB ($((rss/N)) KiB/node)"
simrss=$(awk '/Maximum resident/{print $6}' "$D/sim.err")
echo "sim: peak RSS $((simrss/1024)) MiB ($((simrss/N)) KiB/node)"
