//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// processDead reports whether pid is gone or a zombie nobody has reaped
// yet (its parent died; the container's init may be slow to reap).
func processDead(pid int) bool {
	if processGone(pid) {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// A "rap serve" process killed with SIGKILL, which gives
// it no chance to stop anything, does not leave its toolset_command
// programs running: Linux kills them (parent-death signal).
func TestServeProcessSIGKILLStopsCommands(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	cfg := writeEntries(t, dir, commandEntry("clock", "example", "get-time"))
	p, stderr, err := startServeProcess(t, dir, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--model", "scripted:"+writeScript(t, dir, tokyoScript), "--config", cfg)
	if p == nil {
		t.Fatalf("rap serve: %v\n%s", err, stderr)
	}
	m := regexp.MustCompile(`toolset_command "clock" started \(pid (\d+)`).FindStringSubmatch(p.stdout)
	if m == nil {
		t.Fatalf("no start line for clock in:\n%s", p.stdout)
	}
	pid, _ := strconv.Atoi(m[1])
	killOnFailure(t, pid)
	if processDead(pid) {
		t.Fatalf("pid %d is not running", pid)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	waitFor(t, "the program to be gone", func() bool { return processDead(pid) })
}
