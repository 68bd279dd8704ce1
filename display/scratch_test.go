package display

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestScratch(t *testing.T) {
	src := os.Getenv("SRC")
	if src == "" {
		t.Skip()
	}
	for _, s := range strings.Split(src, "\n===\n") {
		sc, err := Compile(s)
		if err != nil {
			t.Logf("%q => COMPILE %v", s, err)
			continue
		}
		v, err := sc.evalValue(context.Background(), map[string]any{"n": 3, "s": "abc"})
		if err != nil {
			t.Logf("%q => ERR %v", s, err)
			continue
		}
		t.Logf("%q => %s", s, toDebug(v))
	}
}
