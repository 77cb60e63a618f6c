// Package static is the "static" cloud provider: a YAML file (given with
// --cloud-config) lists the machines, for bare-metal racks where an operator
// or a BMC script says what exists and what is powered off. A machine
// missing from the file does not exist; `state: stopped` means shut down.
//
// The file is read again whenever its content changes (checked every
// ReloadPeriod). A file that does not parse or validate is refused with the
// line and field at fault, and the provider keeps answering from the last
// good one.
package static
