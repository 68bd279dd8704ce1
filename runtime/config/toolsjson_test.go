package config

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestToolsJSONEntry(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets":[{"type":"toolset_server","server_url":"http://127.0.0.1:1"},{"type":"tools_json","bundle":"agents/mail","allow_unsigned":true}],
		"security":{"confirm_external_actions":false}}`), "/etc/rap/rap.json")
	if err != nil {
		t.Fatal(err)
	}
	es := f.ToolsJSONEntries()
	if len(es) != 1 || es[0].Bundle != filepath.Join("/etc/rap", "agents/mail") || !es[0].AllowUnsigned {
		t.Fatalf("entries %+v", es)
	}
	if got := f.ServerURLs(); len(got) != 1 {
		t.Fatalf("server urls %v", got)
	}
	if f.ConfirmExternalActions() {
		t.Fatal("confirm_external_actions: false was not read")
	}
	if (&File{}).ConfirmExternalActions() != true {
		t.Fatal("confirm_external_actions must default to true")
	}
	_, err = Parse([]byte(`{"tool_sets":[{"type":"tools_json"}]}`), "f.json")
	if err == nil || !strings.Contains(err.Error(), "tool_sets[0].bundle: missing") {
		t.Fatalf("missing bundle: %v", err)
	}
}
