package exec_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/gorap/gorap/examples/exec"
)

// FuzzCommand decodes arbitrary run_command arguments: decoding never
// panics, and what it accepts is runnable and within the limits.
func FuzzCommand(f *testing.F) {
	for _, seed := range []string{
		`{"command":"ls"}`, `{"command":["sh","-c","echo hi"],"dir":"/"}`,
		`{"command":"ls","args":["-l"],"timeout_seconds":5}`, `{"command":""}`, `{"command":[]}`,
		`{"command":7}`, `{"command":"ls -l"}`, `{"command":"ls","timeout_seconds":-1}`, `null`, `[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c exec.Command
		if err := json.Unmarshal(data, &c); err != nil {
			return
		}
		if len(c.Argv) == 0 || c.Argv[0] == "" || len(c.Argv) > 256 {
			t.Fatalf("accepted argv %q from %s", c.Argv, data)
		}
		if c.Timeout <= 0 || c.Timeout > exec.MaxTimeoutSeconds*time.Second {
			t.Fatalf("accepted timeout %v from %s", c.Timeout, data)
		}
	})
}
