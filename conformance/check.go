package conformance

import (
	"fmt"
	"time"
)

// Level says how binding a check is.
type Level string

// The levels of a check. Only a failed Must makes a report fail.
const (
	// Must: the protocol requires it; an implementation that fails it does
	// not interoperate.
	Must Level = "MUST"
	// Should: the protocol recommends it; failing it is reported, not fatal.
	Should Level = "SHOULD"
	// Extension: a gorap extension of the protocol, checked only where the
	// implementation says it supports it.
	Extension Level = "EXTENSION"
)

// Status is the outcome of one check.
type Status string

// The outcomes of a check.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	// Skip: the check did not apply (a feature not offered, a tool the user
	// did not allow to be called) or could not run because an earlier
	// check it depends on failed.
	Skip Status = "skip"
)

// Check describes one behaviour the kit verifies. Its ID is stable across
// versions, so that scripts and CI configurations can name it.
type Check struct {
	// ID is the check's stable identifier, dotted lower case, such as
	// "tool.ack.status".
	ID string `json:"id"`
	// Level is how binding the behaviour is.
	Level Level `json:"level"`
	// Rule cites where the behaviour is required: a rule of the RAP
	// specification ("RAP TR-2") or the gorap extension's documentation.
	Rule string `json:"rule"`
	// Title says in a few words what is checked.
	Title string `json:"title"`
	// Fix says in one line what an implementation that fails the check
	// should change.
	Fix string `json:"fix"`
}

// DocURL is where docs/conformance.md explains every check; a check's
// anchor is its ID with the dots removed.
const DocURL = "https://github.com/gorap/gorap/blob/main/docs/conformance.md"

// Link returns the address of the check's explanation in docs/conformance.md.
func (c Check) Link() string {
	anchor := make([]byte, 0, len(c.ID))
	for i := 0; i < len(c.ID); i++ {
		if c.ID[i] != '.' {
			anchor = append(anchor, c.ID[i])
		}
	}
	return DocURL + "#" + string(anchor)
}

// Result is the outcome of one check.
type Result struct {
	Check
	Status Status `json:"status"`
	// Message says why the check failed or was skipped; for a pass it may
	// say what was seen.
	Message string `json:"message,omitempty"`
	// Duration is how long the check ran.
	Duration time.Duration `json:"duration_ns"`
	// Exchanges are the HTTP messages the check sent and received, in
	// order, with credentials redacted.
	Exchanges []Exchange `json:"exchanges,omitempty"`
}

// String returns the result as one line: status, level, ID and message.
func (r Result) String() string {
	if r.Message == "" {
		return fmt.Sprintf("%s %s %s", r.Status, r.Level, r.ID)
	}
	return fmt.Sprintf("%s %s %s: %s", r.Status, r.Level, r.ID, r.Message)
}
