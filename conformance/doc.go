// Package conformance checks that a RAP tool server or runtime, written in
// any language, behaves as the protocol requires.
//
// A check is one behaviour, tagged with how binding it is (Must, Should or a
// gorap Extension) and the rule it comes from. A Suite runs its checks one
// after another against the implementation under test and collects a Report,
// which prints as a table for people (WriteText), as one JSON object per
// check for scripts (WriteJSON) and as JUnit XML for CI systems (WriteJUnit).
// Every HTTP exchange a check makes through its T's client is kept with its
// result, so that a failure can be shown with the messages behind it.
//
// The command "rap conformance" runs the suites of this package;
// docs/conformance.md explains every check.
package conformance
