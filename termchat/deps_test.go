package termchat

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/gorap/gorap/runtime"
)

// The terminal client reads threads through the client API only: no
// package of its build, its dependencies included, is the runtime or its
// store, so a change to a stored record cannot reach it.
func TestTermchatDoesNotDependOnTheRuntime(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "github.com/gorap/gorap/termchat" {
		t.Fatalf("go list -deps listed %v, not termchat's dependencies", deps)
	}
	for _, p := range deps {
		if p == "github.com/gorap/gorap/runtime" || strings.HasPrefix(p, "github.com/gorap/gorap/runtime/store") {
			t.Errorf("termchat depends on %s; it must use runtime/api's types only", p)
		}
	}
}

// The tool names the terminal client knows are the runtime's.
func TestToolNamesAreTheRuntimes(t *testing.T) {
	for _, c := range []struct{ ours, runtimes string }{
		{toolSleep, runtime.BuiltinSleep},
		{toolSpawnThread, runtime.BuiltinSpawnThread},
		{toolInjected, runtime.InjectedToolName},
	} {
		if c.ours != c.runtimes {
			t.Errorf("termchat says %q, the runtime %q", c.ours, c.runtimes)
		}
	}
}
