// Package config reads the agent's --config file, a kubelet.config.k8s.io/v1beta1
// KubeletConfiguration, and resolves it into Settings: upstream defaults
// applied, quantities and thresholds parsed, everything validated. It also
// holds the pure arithmetic that depends on those settings: node capacity and
// allocatable (SPEC KUB-11, KUB-12) and the hard-eviction pressure decisions
// behind MemoryPressure, DiskPressure and PIDPressure (§3.4).
//
// Fields nodeplane honours (see Settings for units and defaults):
// nodeLeaseDurationSeconds, nodeStatusUpdateFrequency,
// nodeStatusReportFrequency, registerNode, registerWithTaints, providerID,
// maxPods, podsPerCore, systemReserved, kubeReserved, reservedSystemCPUs,
// evictionHard, mergeDefaultEvictionSettings,
// evictionPressureTransitionPeriod, shutdownGracePeriod,
// shutdownGracePeriodCriticalPods and shutdownGracePeriodByPodPriority.
// Every other KubeletConfiguration field is valid kubelet configuration and
// is accepted and ignored; a field the type does not have is an error.
//
// The package reads one file and computes; it makes no API calls and does
// not read the machine (package host does, and config only consumes its
// observations). Command-line flags are the agent's business: it resolves
// the file, overwrites the Settings fields its flags set, and calls
// Settings.Validate.
package config
