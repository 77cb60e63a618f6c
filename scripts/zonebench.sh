#!/usr/bin/env bash
# What-if: a zone outage at scale. One `nodeplane server` (real controllers)
# and one `nodeplane sim --nodes N --zones a,b,c --watch-pods=false`; after
# all nodes registered and WARM seconds of steady heartbeats:
#   zone a goes dark entirely        (FullDisruption: taints at --node-eviction-rate)
#   60 % of zone b goes dark         (PartialDisruption: --secondary-node-eviction-rate, large zone)
#   FEW nodes of zone c go dark      (Normal: --node-eviction-rate)
# and the zone view (/ui/) is watched in headless Chromium (scripts/zoneshot).
# Reports: detection overhead per silenced node = (controller logged Unknown)
# − (last lease renewal) − grace; taints/s per zone from the controller's
# log; monitor passes (metric); server CPU and RSS, sim RSS; paginated
# (500) and full protobuf LISTs of the Nodes; the page's lag and probes.
#
# Usage: scripts/zonebench.sh N WARM
# Env: LEASE (sim --node-lease-duration, 40s), GRACE (server
# --node-monitor-grace-period, 50s), PERIOD (--node-monitor-period, 5s),
# STATUS (sim --node-status-update-frequency, 10s), REPORT
# (--node-status-report-frequency, 5m), FEW (30), SHOT (screenshot path),
# SIMENV (environment for the sim, e.g. GOMEMLIMIT=3GiB), JOINERS (32), WORKERS
# (64), NP (binary), KEEP (keep the run's files in this directory), DATA
# (directory for the server's data, e.g. /dev/shm when the disk is shared),
# TAIL (seconds watched after the last silenced node's grace ran out, 60).
set -euo pipefail
N=${1:-10000}
WARM=${2:-60}
LEASE=${LEASE:-40s} GRACE=${GRACE:-50s} PERIOD=${PERIOD:-5s} STATUS=${STATUS:-10s} REPORT=${REPORT:-5m}
FEW=${FEW:-30} SHOT=${SHOT:-} SIMENV=${SIMENV:-}
NP=${NP:-./bin/nodeplane}
B=$(mktemp -d)
go build -o "$B/zoneshot" ./scripts/zoneshot
go build -o "$B/nodelist" ./scripts/nodelist
[ -x "$NP" ] || { CGO_ENABLED=0 go build -o "$B/nodeplane" ./cmd/nodeplane; NP=$B/nodeplane; }
D=${KEEP:-$(mktemp -d)}
mkdir -p "$D"
secs() { local v=$1; case $v in *m) echo $(( ${v%m} * 60 ));; *s) echo "${v%s}";; esac; }
GRACE_S=$(secs "$GRACE"); LEASE_S=$(secs "$LEASE"); PERIOD_S=$(secs "$PERIOD")
TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
printf '%s,zone-admin,zone-admin,"system:masters"\n' "$TOKEN" >"$D/tokens.csv"
trap 'kill $SHOTPID $SIMPID $SPID 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "${DATA:+$S}"; [ -n "${KEEP:-}" ] || rm -rf "$D" "$B"' EXIT
SHOTPID= SIMPID=
S=${DATA:-$D}/s
"$NP" server --data-dir "$S" --listen 127.0.0.1:0 --log-format json --token-auth-file "$D/tokens.csv" \
  --node-monitor-grace-period "$GRACE" --node-monitor-period "$PERIOD" >"$D/server.log" 2>&1 &
SPID=$!
for _ in $(seq 1 300); do [ -f "$S/admin.kubeconfig" ] && break; sleep 0.2; done
sleep 1
URL=$(awk '/server:/{print $2; exit}' "$S/admin.kubeconfig")
export KUBECONFIG="$S/admin.kubeconfig"
ticks() { awk '{print $14+$15}' /proc/$1/stat; }
rss() { awk '/VmRSS/{print int($2/1024)}' /proc/$1/status; }
env $SIMENV "$NP" sim --server "$URL" --token-file "$S/node-token" --nodes "$N" --zones a,b,c --watch-pods=false \
  --node-lease-duration "$LEASE" --node-status-update-frequency "$STATUS" --node-status-report-frequency "$REPORT" \
  --joiners "${JOINERS:-32}" --workers "${WORKERS:-64}" --report-interval 30s --stdin=false --control 127.0.0.1:0 >"$D/sim.out" 2>"$D/sim.err" &
SIMPID=$!
T0=$(date +%s)
until grep -q "nodes registered" "$D/sim.out" 2>/dev/null; do sleep 1; kill -0 $SIMPID; done
echo "registered $N nodes in $(( $(date +%s) - T0 )) s; load $(cut -d' ' -f1-3 /proc/loadavg)"
CTRL=$(awk '/control endpoint/{print $3}' "$D/sim.out" | sed 's#/status##')
sleep "$WARM"
curl -s -X POST "$CTRL/reset" >/dev/null
c0=$(ticks $SPID); s0=$(ticks $SIMPID); t0=$(date +%s.%N)
sleep 30
c1=$(ticks $SPID); s1=$(ticks $SIMPID); t1=$(date +%s.%N)
st=$(curl -s "$CTRL/status")
echo "steady 30 s: $(echo "$st" | python3 -c 'import json,sys; s=json.load(sys.stdin); print("renewals/s %.0f (target %.0f) p50 %s p99 %s late %d failed %d" % (s["renewalsPerSecond"], s["targetPerSecond"], s["renewP50"], s["renewP99"], s["late"], s["failedAttempts"]))')"
echo "steady: server CPU $(echo "scale=2; ($c1-$c0)/100/($t1-$t0)" | bc) cores, sim CPU $(echo "scale=2; ($s1-$s0)/100/($t1-$t0)" | bc) cores; server RSS $(rss $SPID) MiB, sim RSS $(rss $SIMPID) MiB; load $(cut -d' ' -f1-3 /proc/loadavg)"
for m in paged full; do
  c0=$(ticks $SPID)
  "$B/nodelist" --kubeconfig "$KUBECONFIG" --mode $m | tr '\n' ' '
  echo "server CPU $(( ($(ticks $SPID) - c0) * 10 )) ms (renewals included)"
done
# The page, signed in before the outage.
A=$(( (N + 2) / 3 ))
"$B/zoneshot" --url "$URL" --token "$TOKEN" --zone a --state FullDisruption --unhealthy "$A" \
  --settle 30s --out "${SHOT:-$D/zone-view.png}" >"$D/shot.out" 2>&1 &
SHOTPID=$!
until grep -q "signed in" "$D/shot.out" 2>/dev/null; do sleep 1; kill -0 $SHOTPID; done
BN=$(( (N + 1) / 3 * 6 / 10 ))
curl -s -X POST "$CTRL/pause?zone=a" >/dev/null
curl -s -X POST "$CTRL/pause?zone=b&count=$BN" >/dev/null
curl -s -X POST "$CTRL/pause?zone=c&count=$FEW" >/dev/null
PAUSED=$(date +%s.%N)
echo "paused zone a ($A), $BN of zone b, $FEW of zone c at $PAUSED"
c0=$(ticks $SPID); t0=$(date +%s.%N)
OBS=$(( GRACE_S + LEASE_S / 4 + 3 * PERIOD_S + ${TAIL:-60} ))
sleep "$OBS"
c1=$(ticks $SPID); t1=$(date +%s.%N)
echo "outage ${OBS} s: server CPU $(echo "scale=2; ($c1-$c0)/100/($t1-$t0)" | bc) cores; server RSS $(rss $SPID) MiB, sim RSS $(rss $SIMPID) MiB (peak $(awk '/VmHWM/{print int($2/1024)}' /proc/$SIMPID/status) MiB); load $(cut -d' ' -f1-3 /proc/loadavg)"
wait $SHOTPID || echo "zoneshot failed"
SHOTPID=
# One request: every renewal time at one revision, and faster than 200
# pages (which, before the lease store kept list views, could outlive its
# history in a slow hour: docs/performance.md).
kubectl get leases -n kube-node-lease -o json --chunk-size=0 >"$D/leases.json"
curl -s -H "Authorization: Bearer $TOKEN" -k "$URL/metrics" >"$D/metrics.all" || true
grep -a '^node_collector_update_all_nodes_health_duration_seconds_\(sum\|count\|bucket\)' "$D/metrics.all" >"$D/metrics.txt" || true
# Requests flow control refused over the whole run (429s), by level and reason.
echo "refused (429) over the run: $(grep -a '^apiserver_flowcontrol_rejected_requests_total' "$D/metrics.all" | awk '$2 != 0 {sub(/.*priority_level="/, "", $1); sub(/",reason="/, "/", $1); sub(/"}/, "", $1); printf "%s %s  ", $1, $2}')"
cat "$D/shot.out"
python3 - "$D" "$PAUSED" "$N" "$GRACE_S" <<'PY'
import json, sys, datetime
d, paused, n, grace = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
ts = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
zone = lambda name: "abc"[int(name.rsplit("-", 1)[1]) % 3]
renew = {l["metadata"]["name"]: ts(l["spec"]["renewTime"]) for l in json.load(open(d + "/leases.json"))["items"]}
unknown, taints = {}, {}
for line in open(d + "/server.log"):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    if r.get("msg") == "node stopped posting status: conditions Unknown":
        unknown.setdefault(r["node"], ts(r["time"]))
    elif r.get("msg") == "tainted node" and "NoExecute" in r.get("taint", ""):
        taints.setdefault(zone(r["node"]), []).append(ts(r["time"]))
q = lambda xs, p: xs[min(len(xs) - 1, int(p * len(xs)))]
for z in "abc":
    over = sorted(unknown[k] - renew[k] - grace for k in unknown if k in renew and zone(k) == z)
    if over:
        print(f"zone {z}: {len(over)} marked Unknown; overhead beyond the {grace:.0f} s grace: p50 {q(over,.5):.2f} s  p99 {q(over,.99):.2f} s  max {over[-1]:.2f} s; last marked {max(unknown[k] for k in unknown if zone(k) == z) - paused:.1f} s after the pause")
    t = sorted(taints.get(z, []))
    if len(t) > 1:
        print(f"zone {z}: {len(t)} NoExecute taints, {(len(t) - 1) / (t[-1] - t[0]):.3f}/s between the first ({t[0] - paused:.0f} s after the pause) and the last")
    else:
        print(f"zone {z}: {len(t)} NoExecute taints")
allover = sorted(unknown[k] - renew[k] - grace for k in unknown if k in renew)
if allover:
    print(f"all {len(allover)}: p50 {q(allover,.5):.2f} s  p99 {q(allover,.99):.2f} s  max {allover[-1]:.2f} s")
    # The controller's marking rate while nodes wait: per half second, the
    # nodes whose grace ended against those marked, and the marks counted
    # while more than 300 waited.
    t0 = min(renew[k] + grace for k in unknown if k in renew)
    due, marked = {}, {}
    for k in unknown:
        if k in renew:
            b = int((renew[k] + grace - t0) * 2); due[b] = due.get(b, 0) + 1
            b = int((unknown[k] - t0) * 2); marked[b] = marked.get(b, 0) + 1
    waiting = busy = busymarks = peak = 0
    for b in range(max(marked) + 1):
        if waiting > 300:
            busy += 1; busymarks += marked.get(b, 0)
        waiting += due.get(b, 0) - marked.get(b, 0); peak = max(peak, waiting)
    if busy:
        print(f"marking: {busymarks / (busy / 2):.0f} nodes/s while more than 300 waited ({busy / 2:.1f} s); at most {peak} waited")
lastA = max((unknown[k] for k in unknown if zone(k) == "a"), default=None)
for line in open(d + "/shot.out"):
    if line.startswith("shown ") and lastA:
        print(f"page showed zone a FullDisruption {float(line.split()[1]) - lastA:.2f} s after the controller logged its last Unknown")
m = {}
for l in open(d + "/metrics.txt"):
    k, v = l.rsplit(" ", 1)
    m[k] = float(v)
s, c = m.get("node_collector_update_all_nodes_health_duration_seconds_sum", 0), m.get("node_collector_update_all_nodes_health_duration_seconds_count", 0)
if c:
    print(f"monitor passes: {int(c)}, mean wall {1000*s/c:.0f} ms; buckets: " + ", ".join(f"{k.split('le=')[1][1:-2]}:{int(v)}" for k, v in m.items() if "_bucket" in k))
PY
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
