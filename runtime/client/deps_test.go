package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The Go client depends on the client API's types only, not on how the
// runtime stores its records: no package of runtime/client's build, its
// dependencies included, is runtime/store or the runtime itself, so a
// change to a stored record cannot reach clients.
func TestClientDoesNotDependOnTheStore(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH to list the dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 || deps[len(deps)-1] != "github.com/gorap/gorap/runtime/client" {
		t.Fatalf("go list -deps listed %v, not runtime/client's dependencies", deps)
	}
	for _, p := range deps {
		if p == "github.com/gorap/gorap/runtime" || strings.HasPrefix(p, "github.com/gorap/gorap/runtime/store") {
			t.Errorf("runtime/client depends on %s; it must use runtime/api's types only", p)
		}
	}
}
