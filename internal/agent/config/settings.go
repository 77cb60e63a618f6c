package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// Upstream defaults for the fields nodeplane honours (SPEC §3.1).
const (
	DefaultNodeLeaseDurationSeconds         = 40
	DefaultNodeStatusUpdateFrequency        = 10 * time.Second
	DefaultNodeStatusReportFrequency        = 5 * time.Minute
	DefaultEvictionPressureTransitionPeriod = 5 * time.Minute
	DefaultEvictionMonitoringPeriod         = 10 * time.Second
	DefaultMaxPods                          = 110
)

// Settings are the agent settings that come from a KubeletConfiguration,
// resolved: defaults applied, quantities and thresholds parsed. It is a
// plain value: the agent may overwrite any field from its command line
// (flags win over the file) and must then call Validate.
type Settings struct {
	// NodeLeaseDurationSeconds is written into the node's Lease
	// (spec.leaseDurationSeconds); the Lease is renewed every quarter of it.
	// Seconds, > 0; default 40.
	NodeLeaseDurationSeconds int32
	// NodeStatusUpdateFrequency is how often the agent recomputes node
	// status and decides whether to patch it. > 0; default 10s.
	NodeStatusUpdateFrequency time.Duration
	// NodeStatusReportFrequency is the longest the agent stays silent when
	// status has not changed. > 0; default 5m, or NodeStatusUpdateFrequency
	// when the file sets that and not this (upstream back-compat).
	NodeStatusReportFrequency time.Duration

	// RegisterNode makes the agent create its Node object. Default true.
	RegisterNode bool
	// RegisterWithTaints are put on the Node when it is first created, never
	// reconciled afterwards.
	RegisterWithTaints []corev1.Taint
	// ProviderID is written into spec.providerID at registration when set.
	ProviderID string

	// MaxPods is the pods capacity. >= 0; default 110.
	MaxPods int32
	// PodsPerCore, when > 0, caps pods capacity at cores × PodsPerCore.
	// >= 0; default 0 (off).
	PodsPerCore int32
	// SystemReserved and KubeReserved are subtracted from capacity to give
	// allocatable. Keys: cpu (cores), memory and ephemeral-storage (bytes),
	// pid (process IDs); quantities >= 0. A file's reservedSystemCPUs is
	// folded in when resolving: its CPU count becomes SystemReserved's cpu
	// and KubeReserved's cpu is dropped.
	SystemReserved corev1.ResourceList
	KubeReserved   corev1.ResourceList

	// EvictionHard holds the hard eviction thresholds in force; a signal
	// absent from the map has no threshold. Default DefaultEvictionHard().
	// memory.available and nodefs.available are also subtracted from
	// allocatable.
	EvictionHard map[Signal]Threshold
	// EvictionPressureTransitionPeriod is how long a pressure condition
	// stays True after its signal has recovered (applied by the eviction
	// manager, not by Pressure). >= 0; default 5m.
	EvictionPressureTransitionPeriod time.Duration
	// EvictionSoft holds the soft thresholds: crossing one evicts only
	// after it has held for its EvictionSoftGracePeriod. Every soft
	// threshold needs a grace period.
	EvictionSoft map[Signal]Threshold
	// EvictionSoftGracePeriod is how long each soft threshold must hold
	// before it evicts. >= 0.
	EvictionSoftGracePeriod map[Signal]time.Duration
	// EvictionMaxPodGracePeriod caps the termination grace period of a pod
	// evicted for a soft threshold, in seconds (0: the pod's own). >= 0.
	// Hard evictions give no grace.
	EvictionMaxPodGracePeriod int32
	// EvictionMinimumReclaim is how much more than its threshold a signal
	// must recover before eviction for it stops (quantity or percentage of
	// capacity). >= 0.
	EvictionMinimumReclaim map[Signal]Threshold
	// EvictionMonitoringPeriod is how often the eviction manager observes
	// the signals (the kubelet's fixed housekeeping period, 10 s; only a
	// nodeplane flag sets it). > 0.
	EvictionMonitoringPeriod time.Duration

	// ShutdownGracePeriod is the total time a graceful node shutdown may
	// take, and ShutdownGracePeriodCriticalPods the part of it reserved for
	// critical pods (SPEC GNS-1). Both >= 0, default 0 (off); critical <=
	// total.
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration
	// ShutdownGracePeriodByPodPriority sets the grace period per pod
	// priority instead; it must be empty when either of the two above is
	// set.
	ShutdownGracePeriodByPodPriority []PriorityGracePeriod
}

// PriorityGracePeriod is the shutdown grace period of the pods whose
// priority is at least Priority (up to the next entry's).
type PriorityGracePeriod struct {
	Priority    int32
	GracePeriod time.Duration // >= 0, whole seconds in the file
}

// Defaults returns the settings of an empty configuration file.
func Defaults() Settings {
	s, err := Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("config: defaults do not validate: %v", err)) // a programming error
	}
	return s
}

// Resolve turns a decoded file (nil for none) into Settings: upstream
// defaults for unset fields, reserved quantities and eviction thresholds
// parsed, and the result validated. Every problem is reported, each as a
// *FieldError naming the file's field.
func Resolve(file *kubeletv1beta1.KubeletConfiguration) (Settings, error) {
	if file == nil {
		file = &kubeletv1beta1.KubeletConfiguration{}
	}
	s := Settings{
		NodeLeaseDurationSeconds:         orDefault(file.NodeLeaseDurationSeconds, DefaultNodeLeaseDurationSeconds),
		NodeStatusUpdateFrequency:        orDefault(file.NodeStatusUpdateFrequency.Duration, DefaultNodeStatusUpdateFrequency),
		NodeStatusReportFrequency:        file.NodeStatusReportFrequency.Duration,
		RegisterNode:                     file.RegisterNode == nil || *file.RegisterNode,
		RegisterWithTaints:               slices.Clone(file.RegisterWithTaints),
		ProviderID:                       file.ProviderID,
		MaxPods:                          orDefault(file.MaxPods, DefaultMaxPods),
		PodsPerCore:                      file.PodsPerCore,
		EvictionPressureTransitionPeriod: orDefault(file.EvictionPressureTransitionPeriod.Duration, DefaultEvictionPressureTransitionPeriod),
		EvictionMaxPodGracePeriod:        file.EvictionMaxPodGracePeriod,
		EvictionMonitoringPeriod:         DefaultEvictionMonitoringPeriod,
		ShutdownGracePeriod:              file.ShutdownGracePeriod.Duration,
		ShutdownGracePeriodCriticalPods:  file.ShutdownGracePeriodCriticalPods.Duration,
	}
	if s.NodeStatusReportFrequency == 0 {
		// Back-compat: a file that sets only the update frequency reports
		// at that frequency, as it did before the report frequency existed.
		s.NodeStatusReportFrequency = DefaultNodeStatusReportFrequency
		if file.NodeStatusUpdateFrequency.Duration != 0 {
			s.NodeStatusReportFrequency = file.NodeStatusUpdateFrequency.Duration
		}
	}
	for _, p := range file.ShutdownGracePeriodByPodPriority {
		s.ShutdownGracePeriodByPodPriority = append(s.ShutdownGracePeriodByPodPriority, PriorityGracePeriod{
			Priority:    p.Priority,
			GracePeriod: time.Duration(p.ShutdownGracePeriodSeconds) * time.Second,
		})
	}

	var errs []error
	s.SystemReserved = parseReserved("systemReserved", file.SystemReserved, &errs)
	s.KubeReserved = parseReserved("kubeReserved", file.KubeReserved, &errs)
	if file.ReservedSystemCPUs != "" {
		n, err := countCPUs(file.ReservedSystemCPUs)
		if err != nil {
			errs = append(errs, &FieldError{Field: "reservedSystemCPUs", Err: err})
		} else {
			if s.SystemReserved == nil {
				s.SystemReserved = corev1.ResourceList{}
			}
			s.SystemReserved[corev1.ResourceCPU] = *resource.NewQuantity(int64(n), resource.DecimalSI)
			delete(s.KubeReserved, corev1.ResourceCPU)
		}
	}
	s.EvictionHard = resolveEvictionHard(file.EvictionHard, file.MergeDefaultEvictionSettings != nil && *file.MergeDefaultEvictionSettings, &errs)
	s.EvictionSoft = parseThresholds("evictionSoft", file.EvictionSoft, &errs)
	s.EvictionMinimumReclaim = parseThresholds("evictionMinimumReclaim", file.EvictionMinimumReclaim, &errs)
	s.EvictionSoftGracePeriod = parseGracePeriods(file.EvictionSoftGracePeriod, &errs)

	if err := s.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, err
	}
	return s, nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// reservable reports whether systemReserved and kubeReserved may name the
// resource.
func reservable(name corev1.ResourceName) bool {
	switch name {
	case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "pid":
		return true
	}
	return false
}

func parseReserved(field string, in map[string]string, errs *[]error) corev1.ResourceList {
	if len(in) == 0 {
		return nil
	}
	out := make(corev1.ResourceList, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		q, err := resource.ParseQuantity(in[name])
		if err != nil {
			*errs = append(*errs, &FieldError{Field: fmt.Sprintf("%s[%s]", field, name), Err: fmt.Errorf("%q: %w", in[name], err)})
			continue
		}
		out[corev1.ResourceName(name)] = q
	}
	return out
}

// Validate checks settings, whether resolved from a file or changed since
// from flags. Every problem is reported, each as a *FieldError naming the
// configuration field.
func (s Settings) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}
	if s.NodeLeaseDurationSeconds <= 0 {
		fail("nodeLeaseDurationSeconds", "must be > 0, got %d", s.NodeLeaseDurationSeconds)
	}
	if s.NodeStatusUpdateFrequency <= 0 {
		fail("nodeStatusUpdateFrequency", "must be > 0, got %s", s.NodeStatusUpdateFrequency)
	}
	if s.NodeStatusReportFrequency <= 0 {
		fail("nodeStatusReportFrequency", "must be > 0, got %s", s.NodeStatusReportFrequency)
	}
	if s.MaxPods < 0 {
		fail("maxPods", "must not be negative, got %d", s.MaxPods)
	}
	if s.PodsPerCore < 0 {
		fail("podsPerCore", "must not be negative, got %d", s.PodsPerCore)
	}
	for field, list := range map[string]corev1.ResourceList{"systemReserved": s.SystemReserved, "kubeReserved": s.KubeReserved} {
		for _, name := range slices.Sorted(maps.Keys(list)) {
			q := list[name]
			switch {
			case !reservable(name):
				fail(fmt.Sprintf("%s[%s]", field, name), "unsupported resource, want cpu, memory, ephemeral-storage or pid")
			case q.Sign() < 0:
				fail(fmt.Sprintf("%s[%s]", field, name), "must not be negative, got %s", q.String())
			}
		}
	}
	for _, sig := range slices.Sorted(maps.Keys(s.EvictionHard)) {
		if err := validateThreshold(sig, s.EvictionHard[sig]); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("evictionHard[%s]", sig), Err: err})
		}
	}
	if s.EvictionPressureTransitionPeriod < 0 {
		fail("evictionPressureTransitionPeriod", "must not be negative, got %s", s.EvictionPressureTransitionPeriod)
	}
	errs = append(errs, s.validateSoftEviction()...)
	if s.EvictionMaxPodGracePeriod < 0 {
		fail("evictionMaxPodGracePeriod", "must not be negative, got %d", s.EvictionMaxPodGracePeriod)
	}
	if s.EvictionMonitoringPeriod <= 0 {
		fail("evictionMonitoringPeriod", "must be > 0, got %s", s.EvictionMonitoringPeriod)
	}
	for i, t := range s.RegisterWithTaints {
		if err := validateTaint(t); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("registerWithTaints[%d]", i), Err: err})
		}
	}
	errs = append(errs, s.validateShutdown()...)
	return errors.Join(errs...)
}

func (s Settings) validateShutdown() []error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}
	if s.ShutdownGracePeriod < 0 {
		fail("shutdownGracePeriod", "must not be negative, got %s", s.ShutdownGracePeriod)
	}
	if s.ShutdownGracePeriodCriticalPods < 0 {
		fail("shutdownGracePeriodCriticalPods", "must not be negative, got %s", s.ShutdownGracePeriodCriticalPods)
	}
	if s.ShutdownGracePeriod >= 0 && s.ShutdownGracePeriodCriticalPods > s.ShutdownGracePeriod {
		fail("shutdownGracePeriodCriticalPods", "%s must not exceed shutdownGracePeriod %s", s.ShutdownGracePeriodCriticalPods, s.ShutdownGracePeriod)
	}
	if len(s.ShutdownGracePeriodByPodPriority) > 0 && (s.ShutdownGracePeriod != 0 || s.ShutdownGracePeriodCriticalPods != 0) {
		fail("shutdownGracePeriodByPodPriority", "must be empty when shutdownGracePeriod or shutdownGracePeriodCriticalPods is set")
	}
	for i, p := range s.ShutdownGracePeriodByPodPriority {
		if p.GracePeriod < 0 {
			fail(fmt.Sprintf("shutdownGracePeriodByPodPriority[%d].shutdownGracePeriodSeconds", i), "must not be negative, got %s", p.GracePeriod)
		}
	}
	return errs
}

func validateTaint(t corev1.Taint) error {
	if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
		return fmt.Errorf("key %q: %v", t.Key, msgs)
	}
	if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
		return fmt.Errorf("value %q: %v", t.Value, msgs)
	}
	switch t.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		return nil
	}
	return fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Effect)
}
