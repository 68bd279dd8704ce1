package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// End to end against @modelcontextprotocol/server-filesystem: a 2.46 MB
// text file, which the server sends both as text and as
// structuredContent, reaches the runtime whole and once, under the RAP
// callback size limit that twice the file would pass.
func TestFilesystemServerLargeFileOnce(t *testing.T) {
	node, script := npmServer(t, "server-filesystem")
	dir := t.TempDir()
	line := "a line of the file, with \"quotes\", <tags> & a tab\there\n"
	file := strings.Repeat(line, 2_460_000/len(line)+1)
	path := filepath.Join(dir, "big.txt")
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	f := startStdio(t, func(o *Options) {
		o.Name = "files"
		o.Command = []string{node, script, dir}
		o.Env = nil
		o.Stderr = devNull(t)
		o.TerminateWait = 300 * time.Millisecond
	})
	r := f.call(t, "read_text_file", map[string]any{"path": path})
	if strings.HasPrefix(r.Text, "Error") {
		t.Fatalf("read_text_file failed: %.300s", r.Text)
	}
	if r.Text != file {
		t.Errorf("read_text_file result is %d bytes (%d copies of the first line), want the %d-byte file once",
			len(r.Text), strings.Count(r.Text, line), len(file))
	}
}

// End to end against @modelcontextprotocol/server-memory, whose tools
// send their answer as JSON text and again as structuredContent: each
// answer reaches the runtime once.
func TestMemoryServerAnswersOnce(t *testing.T) {
	node, script := npmServer(t, "server-memory")
	f := startStdio(t, func(o *Options) {
		o.Name = "memory"
		o.Command = []string{node, script}
		o.Env = []string{"MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "memory.jsonl")}
		o.Stderr = devNull(t)
		o.TerminateWait = 300 * time.Millisecond
	})
	created := f.call(t, "create_entities", map[string]any{"entities": []map[string]any{
		{"name": "Ada Lovelace", "entityType": "person", "observations": []string{"wrote the first \"program\""}},
		{"name": "Analytical Engine", "entityType": "machine", "observations": []string{"designed by Babbage"}},
	}})
	graph := f.call(t, "read_graph", map[string]any{})
	for _, r := range []struct {
		tool, text string
	}{{"create_entities", created.Text}, {"read_graph", graph.Text}} {
		if n := strings.Count(r.text, "designed by Babbage"); n != 1 {
			t.Errorf("%s carries an observation %d times, want once: %s", r.tool, n, r.text)
		}
		if n := strings.Count(r.text, "Ada Lovelace"); n != 1 {
			t.Errorf("%s carries an entity name %d times, want once: %s", r.tool, n, r.text)
		}
	}
	deleted := f.call(t, "delete_entities", map[string]any{"entityNames": []string{"Ada Lovelace"}})
	if n := strings.Count(deleted.Text, "deleted successfully"); n != 1 {
		t.Errorf("delete_entities = %q, want its message once", deleted.Text)
	}
}
