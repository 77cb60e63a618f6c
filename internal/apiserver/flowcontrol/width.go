package flowcontrol

import (
	"strconv"
	"strings"
)

// MaxWidth is the most seats one request takes: an unpaginated LIST.
const MaxWidth = 10

// objectsPerSeat is how many objects of a paginated LIST one seat covers.
const objectsPerSeat = 100

// Width is a request's work estimate in seats: how much of its level it
// takes while it runs. Most requests — a lease renewal, a GET, a write —
// take one seat. A LIST takes one seat per objectsPerSeat objects it may
// return (its ?limit=), at most MaxWidth, and MaxWidth when it is not
// paginated: encoding ten thousand Nodes costs hundreds of milliseconds of
// CPU and tens of megabytes of garbage, where a renewal costs a few hundred
// microseconds and a few kilobytes. So a level full of LISTs runs a tenth as
// many of them as it would run renewals, and a client that LISTs in a loop
// holds ten seats of its share per LIST.
//
// A LIST served from the watch cache (resourceVersion=0, or NotOlderThan
// a version, without a continue token) is not paginated, whatever its limit.
//
// The estimate reads only the request line (no storage lookup, unlike
// kube-apiserver's, which counts the objects stored): a full LIST of a
// small collection is over-estimated, which only means it waits for fewer
// neighbours. It does not allocate.
func Width(method, path, rawQuery string) int {
	if method != "GET" || !IsList(path) {
		return 1
	}
	limit, ok := queryValue(rawQuery, "limit")
	if !ok {
		return MaxWidth
	}
	// A LIST with a resourceVersion (but no continue token and no exact
	// match) is served from the watch cache, which does not paginate.
	rv, _ := queryValue(rawQuery, "resourceVersion")
	_, cont := queryValue(rawQuery, "continue")
	match, _ := queryValue(rawQuery, "resourceVersionMatch")
	if rv != "" && !cont && match != "Exact" {
		return MaxWidth
	}
	n, err := strconv.Atoi(limit)
	if err != nil || n <= 0 {
		return MaxWidth // the handler serves limit=0 (or garbage) unpaginated
	}
	return min(MaxWidth, (n+objectsPerSeat-1)/objectsPerSeat)
}

// IsList reports whether path names a collection (/api/v1/nodes,
// /api/v1/namespaces/<ns>/pods, /apis/<g>/<v>/[namespaces/<ns>/]<resource>),
// so that a GET of it is a LIST. It tells /api/v1/namespaces/<ns>/status
// and /finalize (a Namespace's subresources) from a namespaced collection by
// name: no namespaced resource is called status or finalize.
func IsList(path string) bool {
	var rest string
	var ok bool
	if rest, ok = strings.CutPrefix(path, "/api/"); ok {
		if _, rest, ok = strings.Cut(rest, "/"); !ok {
			return false
		}
	} else if rest, ok = strings.CutPrefix(path, "/apis/"); ok {
		for range 2 { // group, version
			if _, rest, ok = strings.Cut(rest, "/"); !ok {
				return false
			}
		}
	} else {
		return false
	}
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return false // discovery
	}
	n := strings.Count(rest, "/") + 1
	if n == 1 {
		return true // <resource>
	}
	if n == 3 && strings.HasPrefix(rest, "namespaces/") {
		sub := rest[strings.LastIndexByte(rest, '/')+1:]
		return sub != "status" && sub != "finalize"
	}
	return false
}

// queryValue returns the first value of key in a raw query, undecoded.
func queryValue(raw, key string) (string, bool) {
	for raw != "" {
		var kv string
		kv, raw, _ = strings.Cut(raw, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k == key {
			return v, true
		}
	}
	return "", false
}
