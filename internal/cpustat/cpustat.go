// Package cpustat reads the CPU time the current process has used, for the
// benchmark and load commands that report CPU per operation.
package cpustat
