package framework

import (
	"errors"
	"strings"
)

// Code is the outcome of one plugin call.
type Code int

const (
	// Success means the plugin has nothing against the pod (or node).
	Success Code = iota
	// Error is an internal failure; the cycle is aborted and the pod retried
	// with back-off.
	Error
	// Unschedulable rejects the node for now; preemption might help.
	Unschedulable
	// UnschedulableAndUnresolvable rejects the node in a way preemption cannot
	// change (a taint, a label, a node smaller than the pod).
	UnschedulableAndUnresolvable
	// Skip, returned from PreFilter or PreScore, tells the framework not to call
	// the same plugin's Filter or Score in this cycle.
	Skip
)

var codeNames = [...]string{"Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Skip"}

func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return "Unknown"
}

// Status is the result of a plugin call: a code, the human-readable reasons
// (each one becomes a "<count> <reason>" entry of the FailedScheduling
// message) and, for Error, the underlying error. A nil *Status is Success.
// Statuses are immutable once returned, so a plugin may return the same
// *Status for every node.
type Status struct {
	code    Code
	reasons []string
	err     error
	plugin  string
}

// NewStatus returns a status with code and reasons.
func NewStatus(code Code, reasons ...string) *Status {
	return &Status{code: code, reasons: reasons}
}

// AsStatus wraps err as an Error status; a nil err gives a nil (Success)
// status.
func AsStatus(err error) *Status {
	if err == nil {
		return nil
	}
	return &Status{code: Error, reasons: []string{err.Error()}, err: err}
}

// Code returns the status code; Success for a nil status.
func (s *Status) Code() Code {
	if s == nil {
		return Success
	}
	return s.code
}

// IsSuccess reports whether the status is Success (or nil).
func (s *Status) IsSuccess() bool { return s.Code() == Success }

// IsSkip reports whether the status is Skip.
func (s *Status) IsSkip() bool { return s.Code() == Skip }

// IsRejected reports whether the status rejects the pod (Unschedulable or
// UnschedulableAndUnresolvable).
func (s *Status) IsRejected() bool {
	c := s.Code()
	return c == Unschedulable || c == UnschedulableAndUnresolvable
}

// Reasons returns the reasons; nil for a nil status.
func (s *Status) Reasons() []string {
	if s == nil {
		return nil
	}
	return s.reasons
}

// Message joins the reasons with ", ".
func (s *Status) Message() string {
	if s == nil {
		return ""
	}
	return strings.Join(s.reasons, ", ")
}

// Plugin names the plugin that produced the status, once the framework has
// recorded it.
func (s *Status) Plugin() string {
	if s == nil {
		return ""
	}
	return s.plugin
}

// WithPlugin returns the status attributed to plugin name, copying it if it
// carries another attribution.
func (s *Status) WithPlugin(name string) *Status {
	if s == nil || s.plugin == name {
		return s
	}
	c := *s
	c.plugin = name
	return &c
}

// AsError returns the status as an error: nil for Success and Skip, the
// wrapped error for Error, otherwise an error carrying the message.
func (s *Status) AsError() error {
	switch {
	case s.IsSuccess(), s.IsSkip():
		return nil
	case s.err != nil:
		return s.err
	default:
		return errors.New(s.Message())
	}
}

func (s *Status) String() string {
	if s == nil {
		return Success.String()
	}
	if len(s.reasons) == 0 {
		return s.code.String()
	}
	return s.code.String() + ": " + s.Message()
}
