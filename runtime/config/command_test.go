package config

import (
	"reflect"
	"testing"
)

// RAP CF-1: a toolset_command entry is read in both
// forms, an array (run as given) and the reference runtime's string; the
// reference's installation fields are accepted and ignored.
func TestParseToolsetCommand(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [
		{"type":"toolset_command","command":["/bin/srv","--flag","a b"],"env":{"K":"v"},"name":"srv"},
		{"type":"toolset_command","command":"rap-steering-server --port 0","id":"steer","crate_name":"rap-steering-server","git":"https://example.com/x.git"}
	]}`), "f.json")
	if err != nil {
		t.Fatal(err)
	}
	cmds := f.Commands()
	if len(cmds) != 2 {
		t.Fatalf("got %d command entries, want 2", len(cmds))
	}
	if c := cmds[0].Command; c.Name != "srv" || !reflect.DeepEqual(c.Argv, []string{"/bin/srv", "--flag", "a b"}) || c.Env["K"] != "v" {
		t.Errorf("first entry = %+v", c)
	}
	if c := cmds[1].Command; c.Name != "steer" || !reflect.DeepEqual(c.Argv, []string{"rap-steering-server", "--port", "0"}) || cmds[1].ID != "steer" {
		t.Errorf("second entry = %+v", c)
	}
	if cmds[1].Source != "f.json: tool_sets[1]" {
		t.Errorf("source = %q", cmds[1].Source)
	}
	if len(f.ServerURLs()) != 0 {
		t.Errorf("command entries must not appear as server URLs: %v", f.ServerURLs())
	}
}
