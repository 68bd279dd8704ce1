package termchat

import (
	"testing"

	"github.com/gorap/gorap/runtime"
)

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
