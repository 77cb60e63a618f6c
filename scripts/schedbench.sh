#!/usr/bin/env bash
# Benchmark: the built-in scheduler with N simulated nodes (default 5,000;
# 4 CPU / 110 pods each, pods not watched) and P pending pods (default
# 10,000): pods/s from creation to bound, create→bound latency, and the
# server's RSS (the scheduler runs inside it). Usage: scripts/schedbench.sh [N] [P]
set -euo pipefail
N=${1:-5000}
P=${2:-10000}
NP=${NP:-./bin/nodeplane}
[ -x "$NP" ] || { mkdir -p bin; CGO_ENABLED=0 go build -o bin/nodeplane ./cmd/nodeplane; NP=./bin/nodeplane; }
go build -o "${NP%/*}/schedbench" ./scripts/schedbench
D=$(mktemp -d)
trap 'kill $SIMPID $SPID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"' EXIT
"$NP" server --data-dir "$D/s" --listen 127.0.0.1:0 >"$D/server.log" 2>&1 &
SPID=$!
for _ in $(seq 1 100); do [ -f "$D/s/admin.kubeconfig" ] && break; sleep 0.1; done
sleep 1
URL=$(awk '/server:/{print $2; exit}' "$D/s/admin.kubeconfig")
"$NP" sim --server "$URL" --token-file "$D/s/node-token" --nodes "$N" --zones a,b,c --watch-pods=false \
  --report-interval 0 --stdin=false --control "" >"$D/sim.out" 2>"$D/sim.err" &
SIMPID=$!
until grep -q "nodes registered" "$D/sim.out" 2>/dev/null; do sleep 0.5; done
sleep 20 # let the lifecycle controller see every node Ready and drop the not-ready taint
rss0=$(awk '/VmRSS/{print $2}' /proc/$SPID/status)
"${NP%/*}/schedbench" --kubeconfig "$D/s/admin.kubeconfig" --pods "$P"
rss1=$(awk '/VmRSS/{print $2}' /proc/$SPID/status)
echo "server RSS before the pods $((rss0/1024)) MiB, after $((rss1/1024)) MiB (scheduler, caches and $P pods)"
