package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal names an eviction signal, as written in evictionHard.
type Signal string

// The eviction signals a KubeletConfiguration may name.
const (
	SignalMemoryAvailable            Signal = "memory.available"
	SignalAllocatableMemoryAvailable Signal = "allocatableMemory.available"
	SignalNodeFSAvailable            Signal = "nodefs.available"
	SignalNodeFSInodesFree           Signal = "nodefs.inodesFree"
	SignalImageFSAvailable           Signal = "imagefs.available"
	SignalImageFSInodesFree          Signal = "imagefs.inodesFree"
	SignalContainerFSAvailable       Signal = "containerfs.available"
	SignalContainerFSInodesFree      Signal = "containerfs.inodesFree"
	SignalPIDAvailable               Signal = "pid.available"
)

func knownSignal(s Signal) bool {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable,
		SignalNodeFSAvailable, SignalNodeFSInodesFree,
		SignalImageFSAvailable, SignalImageFSInodesFree,
		SignalContainerFSAvailable, SignalContainerFSInodesFree,
		SignalPIDAvailable:
		return true
	}
	return false
}

// Threshold is a hard eviction threshold: a signal is past it when what is
// available is less than the threshold's amount.
type Threshold struct {
	// Quantity is an absolute amount in the signal's unit: bytes for memory
	// and filesystem space, a count for inodes and PIDs. Used when Percent
	// is 0.
	Quantity resource.Quantity
	// Percent is an amount relative to the signal's capacity, in percent
	// (0, 100]. 0 means Quantity applies.
	Percent float64
}

// IsZero reports whether the threshold is off: no amount at all.
func (t Threshold) IsZero() bool { return t.Percent == 0 && t.Quantity.IsZero() }

// Amount returns the threshold in the signal's unit for a signal of the
// given capacity. A percentage is rounded down.
func (t Threshold) Amount(capacity int64) int64 {
	if t.Percent != 0 {
		return int64(float64(capacity) * t.Percent / 100)
	}
	return t.Quantity.Value()
}

func (t Threshold) String() string {
	if t.Percent != 0 {
		return strconv.FormatFloat(t.Percent, 'f', -1, 64) + "%"
	}
	return t.Quantity.String()
}

// ParseThreshold parses an evictionHard value: a quantity ("100Mi", "1000")
// or a percentage of capacity ("10%", "7.5%"). "0" and "0%" parse to the
// zero (off) threshold.
func ParseThreshold(v string) (Threshold, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		pct, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return Threshold{}, fmt.Errorf("%q: not a percentage", v)
		}
		t := Threshold{Percent: pct}
		return t, validatePercent(pct)
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return Threshold{}, fmt.Errorf("%q: want a quantity or a percentage: %w", v, err)
	}
	if q.Sign() < 0 {
		return Threshold{}, fmt.Errorf("%q: must not be negative", v)
	}
	return Threshold{Quantity: q}, nil
}

func validatePercent(p float64) error {
	if p < 0 || p > 100 || p != p {
		return fmt.Errorf("percentage %v%% must be between 0%% and 100%%", p)
	}
	return nil
}

func validateThreshold(sig Signal, t Threshold) error {
	if !knownSignal(sig) {
		return errors.New("unknown eviction signal")
	}
	if t.Percent != 0 && !t.Quantity.IsZero() {
		return fmt.Errorf("set either a quantity (%s) or a percentage (%v%%), not both", t.Quantity.String(), t.Percent)
	}
	if t.Quantity.Sign() < 0 {
		return fmt.Errorf("must not be negative, got %s", t.Quantity.String())
	}
	return validatePercent(t.Percent)
}

// DefaultEvictionHard returns upstream's Linux defaults:
// memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%,
// imagefs.available<15%, imagefs.inodesFree<5%.
func DefaultEvictionHard() map[Signal]Threshold {
	return map[Signal]Threshold{
		SignalMemoryAvailable:   {Quantity: resource.MustParse("100Mi")},
		SignalNodeFSAvailable:   {Percent: 10},
		SignalNodeFSInodesFree:  {Percent: 5},
		SignalImageFSAvailable:  {Percent: 15},
		SignalImageFSInodesFree: {Percent: 5},
	}
}

// resolveEvictionHard applies upstream's rules: no evictionHard in the file
// means the defaults; one that sets any signal replaces them (the signals it
// leaves out have no threshold) unless merge (mergeDefaultEvictionSettings)
// is set, in which case defaults fill the signals it leaves out. An empty
// mapping therefore turns hard eviction off. Thresholds of zero are dropped.
func resolveEvictionHard(in map[string]string, merge bool, errs *[]error) map[Signal]Threshold {
	out := map[Signal]Threshold{}
	if in == nil || merge {
		out = DefaultEvictionHard()
	}
	for _, name := range slices.Sorted(maps.Keys(in)) {
		sig := Signal(name)
		field := fmt.Sprintf("evictionHard[%s]", name)
		if !knownSignal(sig) {
			*errs = append(*errs, &FieldError{Field: field, Err: errors.New("unknown eviction signal")})
			continue
		}
		t, err := ParseThreshold(in[name])
		if err != nil {
			*errs = append(*errs, &FieldError{Field: field, Err: err})
			continue
		}
		out[sig] = t
	}
	maps.DeleteFunc(out, func(_ Signal, t Threshold) bool { return t.IsZero() })
	return out
}

// parseThresholds parses an evictionSoft or evictionMinimumReclaim mapping
// (signal → quantity or percentage). Zero values are kept (a zero minimum
// reclaim is the default anyway; a zero soft threshold is dropped).
func parseThresholds(field string, in map[string]string, errs *[]error) map[Signal]Threshold {
	if len(in) == 0 {
		return nil
	}
	out := make(map[Signal]Threshold, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		sig := Signal(name)
		f := fmt.Sprintf("%s[%s]", field, name)
		if !knownSignal(sig) {
			*errs = append(*errs, &FieldError{Field: f, Err: errors.New("unknown eviction signal")})
			continue
		}
		t, err := ParseThreshold(in[name])
		if err != nil {
			*errs = append(*errs, &FieldError{Field: f, Err: err})
			continue
		}
		if field == "evictionSoft" && t.IsZero() {
			continue
		}
		out[sig] = t
	}
	return out
}

// parseGracePeriods parses evictionSoftGracePeriod (signal → duration).
func parseGracePeriods(in map[string]string, errs *[]error) map[Signal]time.Duration {
	if len(in) == 0 {
		return nil
	}
	out := make(map[Signal]time.Duration, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		sig := Signal(name)
		f := fmt.Sprintf("evictionSoftGracePeriod[%s]", name)
		if !knownSignal(sig) {
			*errs = append(*errs, &FieldError{Field: f, Err: errors.New("unknown eviction signal")})
			continue
		}
		d, err := time.ParseDuration(in[name])
		if err != nil {
			*errs = append(*errs, &FieldError{Field: f, Err: fmt.Errorf("%q: want a duration such as 90s", in[name])})
			continue
		}
		out[sig] = d
	}
	return out
}

// validateSoftEviction checks evictionSoft, its grace periods, the
// minimum reclaims and evictionMaxPodGracePeriod.
func (s Settings) validateSoftEviction() []error {
	var errs []error
	for _, sig := range slices.Sorted(maps.Keys(s.EvictionSoft)) {
		f := fmt.Sprintf("evictionSoft[%s]", sig)
		if err := validateThreshold(sig, s.EvictionSoft[sig]); err != nil {
			errs = append(errs, &FieldError{Field: f, Err: err})
		}
		if _, ok := s.EvictionSoftGracePeriod[sig]; !ok {
			errs = append(errs, &FieldError{Field: f, Err: fmt.Errorf("a soft threshold needs a grace period: set evictionSoftGracePeriod[%s]", sig)})
		}
	}
	for _, sig := range slices.Sorted(maps.Keys(s.EvictionSoftGracePeriod)) {
		f := fmt.Sprintf("evictionSoftGracePeriod[%s]", sig)
		if !knownSignal(sig) {
			errs = append(errs, &FieldError{Field: f, Err: errors.New("unknown eviction signal")})
		}
		if d := s.EvictionSoftGracePeriod[sig]; d < 0 {
			errs = append(errs, &FieldError{Field: f, Err: fmt.Errorf("must not be negative, got %s", d)})
		}
	}
	for _, sig := range slices.Sorted(maps.Keys(s.EvictionMinimumReclaim)) {
		if err := validateThreshold(sig, s.EvictionMinimumReclaim[sig]); err != nil {
			errs = append(errs, &FieldError{Field: fmt.Sprintf("evictionMinimumReclaim[%s]", sig), Err: err})
		}
	}
	return errs
}
