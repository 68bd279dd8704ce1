package toolsjson

import (
	"io"
	"runtime/metrics"
	"strings"
	"testing"
)

// heapAllocs is the bytes the Go heap has allocated since the program
// started: a cumulative count, so its growth bounds what a piece of work
// could have held at any moment, whatever the GC did meanwhile.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// An exec tool printing far more than MaxOutputBytes gets the documented
// "printed more than" error, and the bridge's heap does not grow with what
// the tool printed: at most MaxOutputBytes are kept, the rest is never
// buffered. A tool printing without end is stopped at the cap instead of
// running until its timeout.
func TestExecOutputCapHoldsMemory(t *testing.T) {
	flood := writeScript(t, `head -c 100000000 /dev/zero`)
	endless := writeScript(t, `cat /dev/zero`)
	dir := writeBundle(t, bundleOf(
		execTool("t.flood", flood, ""),
		// 10 minutes: only the cap can end this call within invoke's deadline.
		execTool("t.endless", endless, `,"timeout_ms":600000`),
	), "")
	s := serveBundle(t, dir, Options{})

	const bound = 32 << 20
	before := heapAllocs()
	got := s.invoke(t, "t_flood", map[string]any{"text": "x"})
	grew := heapAllocs() - before
	mustContain(t, got, "Error: ", "printed more than 4194304 bytes")
	if grew > bound {
		t.Errorf("the bridge allocated %d MiB for a tool printing 100 MB; want under %d MiB", grew>>20, bound>>20)
	}

	t.Logf("heap allocations while serving the 100 MB tool: %.1f MiB", float64(grew)/(1<<20))
	mustContain(t, s.invoke(t, "t_endless", map[string]any{"text": "x"}), "Error: ", "printed more than 4194304 bytes")
}

// The capped writers offer io.Copy nothing but Write: a ReadFrom or WriteTo
// (as an embedded bytes.Buffer would promote) would let the copy bypass
// the cap.
func TestCappedWritersOnlyWrite(t *testing.T) {
	for _, w := range []any{&cappedWriter{}, &tailBuffer{}} {
		if _, ok := w.(io.ReaderFrom); ok {
			t.Errorf("%T has ReadFrom, which io.Copy would use instead of its capped Write", w)
		}
		if _, ok := w.(io.WriterTo); ok {
			t.Errorf("%T has WriteTo", w)
		}
	}
	w := &cappedWriter{max: 5}
	calls := 0
	w.onOver = func() { calls++ }
	for _, p := range []string{"abc", "defg", "hij"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want every byte taken", p, n, err)
		}
	}
	if string(w.buf) != "abcde" || !w.over || calls != 1 {
		t.Fatalf("kept %q, over %v, onOver called %d times; want \"abcde\", true, 1", w.buf, w.over, calls)
	}
	var tb tailBuffer
	big := strings.Repeat("x", 3*stderrTail) + "END"
	for i := 0; i < len(big); i += 7 {
		tb.Write([]byte(big[i:min(i+7, len(big))]))
		if cap(tb.b) > 2*stderrTail+64 {
			t.Fatalf("the stderr tail grew to %d bytes", cap(tb.b))
		}
	}
	if got := tb.String(); len(got) != stderrTail || !strings.HasSuffix(got, "END") {
		t.Fatalf("tail holds %d bytes ending %q", len(got), got[len(got)-3:])
	}
}
