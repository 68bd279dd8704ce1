package runtime

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// With Config.Metrics the engine's store is a timedStore, which has only
// store.Store's methods: the optional interfaces of a store (store.Shared,
// the listeners, the delta relay) are asserted on Config.Store, never on
// the engine's store, or a runtime with metrics would lose them.
func TestOptionalStoreInterfacesAskedOfConfigStore(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	assert := regexp.MustCompile(`\.store\.\(`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if assert.MatchString(line) {
				t.Errorf("%s:%d asserts an interface on the engine's store; assert it on cfg.Store: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
