// Package crashtest holds the SIGKILL crash test of the gorap runtime. It
// has no API: its test builds the rap command, runs "rap serve" under a
// busy workload (many threads, user messages posted continuously, tool
// results arriving through callbacks), kills it with SIGKILL at random
// moments, restarts it on the same data directory, and checks that after
// every restart each accepted message appears exactly once in its thread's
// history, no turn is half-written, and every dispatched call gets exactly
// one result.
//
// Run it with:
//
//	go test ./runtime/crashtest -v
//
// and reproduce a failure with the seed it prints:
//
//	GORAP_CRASH_SEED=12345 go test ./runtime/crashtest -v
package crashtest
