package config

import (
	"github.com/nodeplane/nodeplane/internal/agent/host"
)

// Pressure reports which pressure conditions the observations put the node
// under, by the hard eviction thresholds in s: a signal is under pressure
// when what is available is less than its threshold (a quantity, or a
// percentage of the signal's capacity). An unobserved signal or one without
// a threshold is never under pressure.
//
//   - memory: memory.available against obs.Memory.
//   - disk: nodefs.available against obs.NodeFS and nodefs.inodesFree
//     against obs.NodeFSInodes. nodeplane keeps everything on the
//     filesystem of its data directory, so the imagefs.* and containerfs.*
//     thresholds are judged against the same observations, as on an
//     upstream node whose images share the node filesystem.
//   - pid: pid.available against obs.PID.
//
// allocatableMemory.available is accepted in configuration but not judged.
// Pressure is instantaneous; holding a condition for
// EvictionPressureTransitionPeriod is the caller's business.
func Pressure(obs host.Signals, s Settings) (memory, disk, pid bool) {
	past := func(sig host.Signal, names ...Signal) bool {
		if !sig.Observed() {
			return false
		}
		for _, name := range names {
			if t, ok := s.EvictionHard[name]; ok && !t.IsZero() && sig.Available < t.Amount(sig.Capacity) {
				return true
			}
		}
		return false
	}
	memory = past(obs.Memory, SignalMemoryAvailable)
	disk = past(obs.NodeFS, SignalNodeFSAvailable, SignalImageFSAvailable, SignalContainerFSAvailable) ||
		past(obs.NodeFSInodes, SignalNodeFSInodesFree, SignalImageFSInodesFree, SignalContainerFSInodesFree)
	pid = past(obs.PID, SignalPIDAvailable)
	return memory, disk, pid
}
