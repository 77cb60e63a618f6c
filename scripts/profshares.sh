#!/usr/bin/env bash
# profshares.sh BINARY PROFILE [SAMPLE_INDEX]: the shares of a CPU or
# allocation profile of BenchmarkLeaseRenewal (internal/apiserver) by part
# of the heartbeat path. Each sample goes to the first rule below whose
# pattern matches any frame of its stack, so a rule higher in the list wins
# over the handlers that call it. "benchmark client" and "setup" are the
# benchmark's own work (building requests, decoding answers, starting the
# server): they are reported, and the shares of the renewal exclude them.
#
#   scripts/profshares.sh /tmp/perf/apiserver.test cpu.pprof
#   scripts/profshares.sh /tmp/perf/apiserver.test mem.pprof alloc_space
#   scripts/profshares.sh /tmp/perf/apiserver.test mem.pprof alloc_objects
set -euo pipefail
bin=$1 prof=$2 index=${3:-}
args=(-traces)
[[ -n $index ]] && args+=(-sample_index="$index")
# PROFSHARES_DEBUG=<rule name> also lists that rule's leaf functions.
go tool pprof "${args[@]}" "$bin" "$prof" 2>/dev/null | awk -v debug="${PROFSHARES_DEBUG:-}" '
function num(v,   n, u) {
	n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
	if (u == "ns") n /= 1e6; else if (u == "us") n /= 1e3; else if (u == "s") n *= 1e3
	else if (u == "kB") n *= 1e3; else if (u == "MB") n *= 1e6; else if (u == "GB") n *= 1e9
	else if (u == "k") n *= 1e3; else if (u == "M") n *= 1e6
	return n
}
BEGIN {
	n = 0
	rule[++n] = "setup";                   pat[n] = "newTestServer|StartEmbedded|testing\\.\\(\\*M\\)|runtime/pprof"
	rule[++n] = "benchmark client";        pat[n] = "BenchmarkLeaseRenewal\\.func"
	rule[++n] = "watch cache (decode event, fields, history)"; pat[n] = "apiserver/store\\.\\(\\*cache\\)|apiserver/store\\.\\(\\*Store\\)\\.Run"
	rule[++n] = "etcd watch (mvcc watch, event send)"; pat[n] = "mvcc\\.\\(\\*watchableStore\\)|mvcc\\.\\(\\*watchStream\\)|v3rpc\\.\\(\\*serverWatchStream\\)|storage/etcd\\.\\(\\*Store\\)\\.Watch|storage/etcd\\.\\(\\*watcher|clientv3\\.\\(\\*watchGrpcStream\\)|mvcc\\.newWatcherBatch|mvcc\\.kvsToEvents"
	rule[++n] = "etcd raft, WAL, apply, bbolt"; pat[n] = "etcdserver\\.\\(\\*EtcdServer\\)\\.(run|apply|applyAll|start|applyEntries)|etcdserver\\.\\(\\*raftNode\\)|go\\.etcd\\.io/raft|storage/wal|storage/backend|go\\.etcd\\.io/bbolt|etcdserver\\.\\(\\*EtcdServer\\)\\.(linearizableReadLoop|purgeFile|monitor)"
	rule[++n] = "response encode";         pat[n] = "apiserver\\.\\(\\*resourceHandler\\)\\.writeObject|apiserver\\.writeObject|apiserver\\.writeStatus"
	rule[++n] = "storage encode";          pat[n] = "apiserver/store\\.\\(\\*Store\\)\\.encode|apiserver\\.\\(\\*resourceHandler\\)\\.toStorage"
	rule[++n] = "etcd txn (client call, Txn)"; pat[n] = "internal/storage/etcd\\.\\(\\*Store\\)|etcdserver\\.\\(\\*EtcdServer\\)\\.Txn|go\\.etcd\\.io/etcd/client"
	rule[++n] = "decode stored object";    pat[n] = "apiserver/store\\.\\(\\*Store\\)\\.decode|apiserver\\.\\(\\*resourceHandler\\)\\.fromStorage"
	rule[++n] = "read current (cache + deep copy)"; pat[n] = "apiserver\\.\\(\\*resourceHandler\\)\\.current"
	rule[++n] = "admission";               pat[n] = "apiserver\\.\\(\\*resourceHandler\\)\\.admit"
	rule[++n] = "defaulting, validation, meta"; pat[n] = "apiserver\\.\\(\\*resourceHandler\\)\\.(updateObject|immutableMeta|checkIdentity)"
	rule[++n] = "decode body";             pat[n] = "apiserver\\.decodeBody"
	rule[++n] = "query parameters";        pat[n] = "apiserver\\.parseWriteParams"
	rule[++n] = "authz (resource request)"; pat[n] = "authz\\.\\(\\*Authorizer\\)\\.Authorize|apiserver\\.\\(\\*Server\\)\\.authorize"
	rule[++n] = "metrics";                 pat[n] = "apiserver\\.\\(\\*Metrics\\)"
	rule[++n] = "routing, request info";   pat[n] = "apiserver\\.parseResourcePath|http\\.\\(\\*ServeMux\\)\\.(findHandler|[hH]andler)"
	rule[++n] = "handler, other";          pat[n] = "apiserver\\.\\(\\*Server\\)\\.ServeHTTP|apiserver\\.\\(\\*resourceHandler\\)"
	rule[++n] = "flow control, deadline";  pat[n] = "apiserver\\.\\(\\*inFlight\\)|flowcontrol\\."
	rule[++n] = "authz (non-resource wrapper)"; pat[n] = "NonResourceWith"
	rule[++n] = "authn";                   pat[n] = "authn\\.|\\.Middleware\\.func"
	rule[++n] = "GC";                      pat[n] = "runtime\\.gcBgMarkWorker|runtime\\.bgsweep|runtime\\.bgscavenge"
	rule[++n] = "other (scheduler, timers, idle etcd)"; pat[n] = "."
	nrules = n
}
function flush(   i) {
	if (stack == "") return
	for (i = 1; i <= nrules; i++) if (stack ~ pat[i]) { sum[i] += val; total += val; break }
	if (debug != "" && rule[i] == debug) { split(stack, f, "\n"); leaf[f[1]] += val }
	stack = ""
}
/^-----------\+/ { flush(); want = 1; next }
/^ *bytes:/ { next }
want && NF >= 2 { val = num($1); stack = $2; want = 0; next }
NF >= 1 && stack != "" { stack = stack "\n" $1 }
END {
	flush()
	own = total - sum[1] - sum[2]
	for (i = 1; i <= nrules; i++) if (sum[i] > 0) {
		share = (i <= 2) ? "(excluded)" : sprintf("%5.1f %%", 100 * sum[i] / own)
		printf "%-50s %14.0f  %s\n", rule[i], sum[i], share
	}
	printf "%-50s %14.0f\n", "renewal total (excluding setup and client)", own
	for (l in leaf) printf "  %14.0f  %s\n", leaf[l], l | "sort -rn | head -25"
}'
