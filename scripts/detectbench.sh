#!/usr/bin/env bash
# Benchmark: failure detection with N simulated nodes (default 10,000) and
# the default lifecycle knobs (period 5 s, grace 50 s). After all nodes run
# for WARM seconds, zone a (a third of them) goes silent. For each silent
# node: detection overhead = (time the controller wrote Unknown) − (last lease
# renewal) − grace. Also reports the monitor pass duration histogram.
# Usage: scripts/detectbench.sh [N] [WARM]
set -euo pipefail
N=${1:-10000}
WARM=${2:-60}
NP=${NP:-./bin/nodeplane}
[ -x "$NP" ] || { mkdir -p bin; CGO_ENABLED=0 go build -o bin/nodeplane ./cmd/nodeplane; NP=./bin/nodeplane; }
D=$(mktemp -d)
trap 'kill $SIMPID $SPID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$D"' EXIT
"$NP" server --data-dir "$D/s" --listen 127.0.0.1:0 --log-format json >"$D/server.log" 2>&1 &
SPID=$!
for _ in $(seq 1 100); do [ -f "$D/s/admin.kubeconfig" ] && break; sleep 0.1; done
sleep 1
URL=$(awk '/server:/{print $2; exit}' "$D/s/admin.kubeconfig")
mkfifo "$D/in"
"$NP" sim --server "$URL" --token-file "$D/s/node-token" --nodes "$N" --zones a,b,c --report-interval 0 \
  --control 127.0.0.1:0 <"$D/in" >"$D/sim.out" 2>"$D/sim.err" &
SIMPID=$!
exec 3>"$D/in"
until grep -q "nodes registered" "$D/sim.out" 2>/dev/null; do sleep 0.5; done
CTRL=$(awk '/control endpoint/{print $3}' "$D/sim.out" | sed 's#/status##')
sleep "$WARM"
curl -s -X POST "$CTRL/pause?zone=a" >/dev/null
PAUSED=$(date +%s.%N)
sleep 90
export KUBECONFIG="$D/s/admin.kubeconfig"
kubectl get leases -n kube-node-lease -o json >"$D/leases.json"
curl -s --cacert "$D/s/pki/ca.crt" --cert "$D/s/pki/admin.crt" --key "$D/s/pki/admin.key" "$URL/metrics" \
  | grep '^node_collector_update_all_nodes_health_duration_seconds_\(sum\|count\)' >"$D/metrics.txt" || true
python3 - "$D" "$PAUSED" "$N" <<'PY'
import json, sys, datetime
d, paused, n = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
renew = {l["metadata"]["name"]: ts(l["spec"]["renewTime"]) for l in json.load(open(d + "/leases.json"))["items"]}
unknown = {}
for line in open(d + "/server.log"):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("msg") == "node stopped posting status: conditions Unknown":
        unknown.setdefault(r["node"], ts(r["time"]))
over = sorted(unknown[k] - renew[k] - 50.0 for k in unknown if k in renew)
if not over:
    sys.exit("no node was marked Unknown")
q = lambda p: over[min(len(over) - 1, int(p * len(over)))]
print(f"nodes={n} silent={len(over)} (zone a)")
print(f"detection overhead beyond the 50 s grace: p50 {q(0.5):.2f} s  p99 {q(0.99):.2f} s  max {over[-1]:.2f} s")
m = dict(l.split() for l in open(d + "/metrics.txt"))
s, c = float(m["node_collector_update_all_nodes_health_duration_seconds_sum"]), float(m["node_collector_update_all_nodes_health_duration_seconds_count"])
print(f"monitor passes: {int(c)}, mean wall time {1000*s/c:.1f} ms (incl. the passes that wrote {len(over)} Unknown statuses)")
PY
