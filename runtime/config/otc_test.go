package config

import (
	"strings"
	"testing"
	"time"
)

// The otc_server entry type.
func TestOTCServerEntry(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [
		{"type":"toolset_server","server_url":"http://127.0.0.1:3001"},
		{"type":"otc_server","name":"arcade","url":"http://127.0.0.1:8002/","dialect":"arcade","secret_env":"MY_SECRET","call_timeout":"90s"}]}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	o := f.OTCServers()
	if len(o) != 1 || o[0].Name != "arcade" || o[0].URL != "http://127.0.0.1:8002" || o[0].Dialect != "arcade" || o[0].SecretEnv != "MY_SECRET" || time.Duration(o[0].CallTimeout) != 90*time.Second {
		t.Fatalf("entry %+v", o)
	}
	if urls := f.ServerURLs(); len(urls) != 1 {
		t.Fatalf("otc entry leaked into ServerURLs: %v", urls)
	}
	for _, c := range []struct{ in, want string }{
		{`{"type":"otc_server","url":"http://h"}`, "tool_sets[0].name: missing"},
		{`{"type":"otc_server","name":"x"}`, "tool_sets[0].url: missing"},
		{`{"type":"otc_server","name":"x","url":"http://h","dialect":"soap"}`, `"soap" is not a dialect`},
		{`{"type":"otc_server","name":"x","url":"http://h","secret":"inline"}`, `unknown field "secret"`},
		{`{"type":"otc_server","name":"x","url":"http://h","call_timeout":"soon"}`, "not a duration"},
	} {
		_, err := Parse([]byte(`{"tool_sets": [`+c.in+`]}`), "rap.json")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.in, err, c.want)
		}
	}
}
