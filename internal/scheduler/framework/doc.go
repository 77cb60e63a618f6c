// Package framework is the scheduler's pure core: the plugin interfaces
// (PreFilter, Filter, PreScore, Score with normalisation), the per-cycle
// state, the NodeInfo view of a node and the requests of its pods, and the
// Framework that runs one scheduling cycle for one pod over a list of
// NodeInfos and either names a node or returns a FitError whose message is the
// upstream FailedScheduling text ("0/N nodes are available: ...").
//
// It owns the cycle's decision and nothing else: it makes no API calls, reads
// no clock, starts no goroutines and keeps no cluster state between cycles
// other than the rotating start index and the seeded tie-break source. The
// node list comes from the caller (the scheduler cache's snapshot); the result
// goes back to the caller, which assumes, binds and reports. The concrete
// plugins live in ../plugins; the queue and cache in ../queue and ../cache.
package framework
