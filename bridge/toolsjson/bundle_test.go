package toolsjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const objSchema = `{"type":"object"}`

// validTools is a bundle with one exec tool and one http tool.
const validTools = `{
  "version": 1,
  "tools": [
    {"id": "files.echo", "description": "Echoes its input.",
     "transport": {"kind": "exec", "command": "/bin/cat"},
     "input_schema": {"$ref": "schema:echo.in.v1"},
     "result_schema": {"type": "object"},
     "schema_refs": {"echo.in.v1": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
     "capabilities": ["fs:/tmp/echo"],
     "budget": {"tokens": 500, "usd": 0.25},
     "observability": {"tags": ["local"]}},
    {"id": "mail.smtp_send", "description": "Sends mail.",
     "transport": {"kind": "http", "method": "POST", "url": "https://api.mail.example/send/{to}"},
     "input_schema": {"$ref": "schema:mail.send.request.v1"},
     "result_schema": {"$ref": "schema:mail.send.result.v1"},
     "capabilities": ["net:api.mail.example"]}
  ]
}`

func writeValid(t *testing.T) string {
	dir := writeBundle(t, validTools, "# grants\nfs:/tmp/*\nnet:api.mail.example  # mail relay\n")
	if err := os.MkdirAll(filepath.Join(dir, SchemaDir), 0o755); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, SchemaDir, "mail.send.request.v1.json"), `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`, 0o644)
	mustWrite(t, filepath.Join(dir, SchemaDir, "mail.send.result.v1.json"), `{"type":"object","properties":{"sent":{"type":"boolean"}},"required":["sent"]}`, 0o644)
	return dir
}

// TestDigestIsBLAKE3 pins the digest to the BLAKE3 test vectors.
func TestDigestIsBLAKE3(t *testing.T) {
	if got := Digest(nil); got != "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262" {
		t.Fatalf("BLAKE3 of the empty input = %s", got)
	}
}

func TestLoadValidBundle(t *testing.T) {
	dir := writeValid(t)
	for _, p := range []string{dir, filepath.Join(dir, ToolsFile)} {
		b, err := Load(p, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.Tools) != 2 || len(b.Denied) != 0 || len(b.Warnings) != 0 {
			t.Fatalf("tools %d denied %v warnings %v", len(b.Tools), b.Denied, b.Warnings)
		}
		echo, mail := b.Tools[0], b.Tools[1]
		if echo.Name != "files_echo" || mail.Name != "mail_smtp_send" || mail.ID != "mail.smtp_send" {
			t.Errorf("names %q %q", echo.Name, mail.Name)
		}
		if echo.InputRef != "schema:echo.in.v1" || echo.ResultRef != "inline" || mail.ResultRef != "schema:mail.send.result.v1" {
			t.Errorf("refs %q %q %q", echo.InputRef, echo.ResultRef, mail.ResultRef)
		}
		if !strings.Contains(string(mail.InputSchema), `"required":["to"]`) {
			t.Errorf("mail input schema not resolved from schemas/: %s", mail.InputSchema)
		}
		if echo.Budget == nil || *echo.Budget.Tokens != 500 || echo.Tags[0] != "local" {
			t.Errorf("budget/tags %+v %v", echo.Budget, echo.Tags)
		}
	}
}

// A tampered tools.json is refused with both digests and the fix.
func TestLoadTamperedRefused(t *testing.T) {
	dir := writeValid(t)
	p := filepath.Join(dir, ToolsFile)
	data, _ := os.ReadFile(p)
	signed := Digest(data)
	data[strings.Index(string(data), "Echoes")] = 'e' // one byte
	mustWrite(t, p, string(data), 0o644)
	b, err := Load(dir, nil)
	var be *BundleError
	if !errors.As(err, &be) || b != nil {
		t.Fatalf("tampered bundle loaded: %v", err)
	}
	mustContain(t, err.Error(), "manifest.toml: artifacts.tools.blake3", Digest(data), signed, "rap toolsjson digest")

	// --allow-unsigned loads it, loudly.
	b, err = Load(dir, &LoadOptions{AllowUnsigned: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Warnings) != 1 || !strings.Contains(b.Warnings[0], "UNSIGNED BUNDLE") || !strings.Contains(b.Warnings[0], "development only") {
		t.Fatalf("warnings %v", b.Warnings)
	}
}

func TestLoadMissingDigestRefused(t *testing.T) {
	dir := writeValid(t)
	mustWrite(t, filepath.Join(dir, ManifestFile), "[artifacts.tools]\npath = \"tools.json\"\n", 0o644)
	_, err := Load(dir, nil)
	mustContain(t, errString(err), "artifacts.tools.blake3: missing", Digest([]byte(validTools)))
	os.Remove(filepath.Join(dir, ManifestFile))
	_, err = Load(dir, nil)
	mustContain(t, errString(err), "manifest.toml:", "does not exist", "rap toolsjson digest")
	mustWrite(t, filepath.Join(dir, ManifestFile), "[artifacts.tools\n", 0o644)
	_, err = Load(dir, nil)
	mustContain(t, errString(err), "manifest.toml: is not valid TOML")
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// Every violation is reported with its path, and nothing of an invalid
// bundle is loaded.
func TestLoadViolationsWithPaths(t *testing.T) {
	exec := func(id, cmd string) string {
		return `{"id":"` + id + `","description":"d","transport":{"kind":"exec","command":"` + cmd + `"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `}`
	}
	good := exec("ok.tool", "/bin/true")
	cases := []struct {
		name, tools string
		want        []string
	}{
		{"version 2", `{"version":2,"tools":[]}`, []string{"version: is 2", "only version 1", "install a gorap release"}},
		{"no version", `{"tools":[]}`, []string{"version: missing"}},
		{"unknown member", `{"version":1,"tools":[],"extra":1}`, []string{"tools.json:", "unknown field"}},
		{"relative command", `{"version":1,"tools":[` + good + `,` + exec("x.y", "bin/tool") + `]}`, []string{"tools[1].transport.command", "not an absolute path"}},
		{"dangling ref", `{"version":1,"tools":[` + good + `,{"id":"a","description":"d","transport":{"kind":"exec","command":"/bin/true"},"input_schema":{"$ref":"schema:nope.v1"},"result_schema":` + objSchema + `}]}`,
			[]string{"tools[1].input_schema.$ref", `"schema:nope.v1" is not defined`, "never fetched"}},
		{"nested dangling ref", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"exec","command":"/bin/true"},"input_schema":{"type":"object","properties":{"x":{"$ref":"schema:gone"}}},"result_schema":` + objSchema + `}]}`,
			[]string{"tools[0].input_schema.properties.x.$ref", `"schema:gone" is not defined`}},
		{"remote ref", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"exec","command":"/bin/true"},"input_schema":{"$ref":"https://example.com/s.json"},"result_schema":` + objSchema + `}]}`,
			[]string{"tools[0].input_schema"}},
		{"duplicate id", `{"version":1,"tools":[` + good + `,` + good + `]}`, []string{"tools[1].id", `"ok.tool" is already the id of tools[0]`}},
		{"name collision", `{"version":1,"tools":[` + exec("a.b", "/bin/true") + `,` + exec("a_b", "/bin/true") + `]}`, []string{"tools[1].id", `map to the RAP tool name "a_b"`}},
		{"missing id and description", `{"version":1,"tools":[{"transport":{"kind":"exec","command":"/bin/true"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `}]}`,
			[]string{"tools[0].id: missing", "tools[0].description: missing"}},
		{"missing schemas", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"exec","command":"/bin/true"}}]}`,
			[]string{"tools[0].input_schema: missing", "tools[0].result_schema: missing"}},
		{"bad kind", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"unix"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `}]}`,
			[]string{"tools[0].transport.kind", `"unix" is not supported`}},
		{"http template in host", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"http","method":"GET","url":"https://{host}/x"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `}]}`,
			[]string{"tools[0].transport.url", "template in its host"}},
		{"http relative url and bad method", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"http","method":"post","url":"/send"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `}]}`,
			[]string{"tools[0].transport.method", "tools[0].transport.url", "not an absolute"}},
		{"header secret not listed", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"http","method":"GET","url":"https://h.example/","headers":{"Authorization":"Bearer ${secret:k}"}},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `}]}`,
			[]string{"tools[0].transport.headers.Authorization", `"k" is not listed in the tool's secrets`}},
		{"bad capability", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"exec","command":"/bin/true"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `,"capabilities":["net"]}]}`,
			[]string{"tools[0].capabilities[0]", "FAMILY:VALUE"}},
		{"unknown entry member", `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"exec","command":"/bin/true"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `,"requires_confirmaton":true}]}`,
			[]string{"tools[0]:", "unknown field"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeBundle(t, c.tools, "")
			b, err := Load(dir, nil)
			var be *BundleError
			if !errors.As(err, &be) || b != nil {
				t.Fatalf("bundle not refused: %v", err)
			}
			mustContain(t, err.Error(), c.want...)
			vs, _, verr := Validate(dir, nil)
			if verr != nil || len(vs) == 0 {
				t.Fatalf("Validate: %v %v", vs, verr)
			}
		})
	}
}

// A capability not granted denies that tool, with a cap_denied record;
// the other tools are served.
func TestCapabilityNotGrantedDeniesTool(t *testing.T) {
	dir := writeValid(t)
	mustWrite(t, filepath.Join(dir, PolicyFile), "fs:/tmp/*\n", 0o644) // no net: grant
	b, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Tools) != 1 || b.Tools[0].ID != "files.echo" {
		t.Fatalf("served %v", b.Tools)
	}
	if len(b.Denied) != 2 || b.Denied[0].Path != "tools[1].capabilities[0]" || b.Denied[1].Capability != "net:api.mail.example" {
		t.Fatalf("denied %+v", b.Denied)
	}
	s := serveLoaded(t, b, Options{})
	ts, err := s.rt.Discover(t.Context(), s.url)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts.Tools) != 1 || ts.Tools[0].Name != "files_echo" {
		t.Fatalf("manifest tools %+v", ts.Tools)
	}
	var rec AuditRecord
	line, _, _ := strings.Cut(s.audit.String(), "\n")
	if err := json.Unmarshal([]byte(line), &rec); err != nil {
		t.Fatalf("audit %q: %v", s.audit.String(), err)
	}
	if rec.Kind != AuditCapDenied || rec.ToolID != "mail.smtp_send" || rec.Capability != "net:api.mail.example" {
		t.Fatalf("audit record %+v", rec)
	}
	vs, _, _ := Validate(dir, nil)
	if len(vs) != 2 || vs[0].Path != "tools[1].capabilities[0]" {
		t.Fatalf("Validate %v", vs)
	}
}

// An http tool whose host no net: grant covers is denied even when its
// capabilities do not mention the host.
func TestHTTPHostNeedsNetGrant(t *testing.T) {
	tools := `{"version":1,"tools":[{"id":"h","description":"d","transport":{"kind":"http","method":"GET","url":"https://evil.example/x"},"input_schema":` + objSchema + `,"result_schema":` + objSchema + `,"capabilities":["net:good.example"]}]}`
	dir := writeBundle(t, tools, "net:good.example\n")
	b, err := Load(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Tools) != 0 || len(b.Denied) != 1 || b.Denied[0].Capability != "net:evil.example" || b.Denied[0].Path != "tools[0].transport.url" {
		t.Fatalf("tools %v denied %+v", b.Tools, b.Denied)
	}
	if _, err := NewServer(b, nil); err == nil || !strings.Contains(err.Error(), "exposes no tools") {
		t.Fatalf("NewServer: %v", err)
	}
}

func TestPolicyGrants(t *testing.T) {
	p, err := ParsePolicy([]byte("# comment\n\nnet:api.example  # trailing\nfs:/tmp/*\nnet:127.0.0.1:8080\n"))
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range map[string]bool{
		"net:api.example": true, "net:api.example.evil": false, "fs:/tmp/a/b": true, "fs:/etc": false,
		"net:127.0.0.1:8080": true, "net:127.0.0.1": false,
	} {
		if p.Grants(c) != want {
			t.Errorf("Grants(%q) = %v", c, !want)
		}
	}
	if !p.GrantsHost("api.example:443") || p.GrantsHost("127.0.0.1:9") || !p.GrantsHost("127.0.0.1:8080") {
		t.Error("GrantsHost")
	}
	for _, bad := range []string{"net", "net:a b", "net:*.example", ":x"} {
		if _, err := ParsePolicy([]byte(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ParsePolicy(%q) = %v", bad, err)
		}
	}
}

// Recursive and fanned-out schema references are refused quickly instead
// of expanding without bound.
func TestSchemaRefCyclesAndFanOut(t *testing.T) {
	entry := func(refs string) string {
		return `{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"exec","command":"/bin/true"},"input_schema":{"$ref":"schema:a"},"result_schema":{"type":"object"},"schema_refs":` + refs + `}]}`
	}
	_, err := Load(writeBundle(t, entry(`{"a":{"type":"object","properties":{"x":{"$ref":"schema:b"}}},"b":{"type":"object","properties":{"y":{"$ref":"schema:a"}}}}`), ""), nil)
	mustContain(t, errString(err), "tools[0].input_schema.properties.x.properties.y.$ref", `"schema:a" refers to itself (through a -> b)`)
	// Each level refers to the next twice: 2^20 copies if expanded.
	var b strings.Builder
	b.WriteString("{")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, `"l%d":{"type":"object","properties":{"p":{"$ref":"schema:l%d"},"q":{"$ref":"schema:l%d"}}},`, i, i+1, i+1)
	}
	b.WriteString(`"l20":{"type":"string"},"a":{"$ref":"schema:l0"}}`)
	_, err = Load(writeBundle(t, entry(b.String()), ""), nil)
	mustContain(t, errString(err), "more than 256 schema: references")
}

// The manifest keeps the original id, budget, tags and the confirmation
// flag as x-runloop-* annotations.
func TestManifestAnnotations(t *testing.T) {
	s := serveBundle(t, writeValid(t), Options{})
	ts, err := s.rt.Discover(t.Context(), s.url)
	if err != nil {
		t.Fatal(err)
	}
	a := ts.Tools[0].Annotations
	if ts.Tools[0].Name != "files_echo" || a == nil {
		t.Fatalf("tool %+v", ts.Tools[0])
	}
	for k, want := range map[string]string{
		AnnotationID: `"files.echo"`, AnnotationBudget: `{"tokens":500,"usd":0.25}`, AnnotationTags: `["local"]`,
	} {
		if got := string(a.Custom[k]); got != want {
			t.Errorf("%s = %s, want %s", k, got, want)
		}
	}
	if _, ok := a.Custom[AnnotationConfirmation]; ok {
		t.Error("confirmation annotation on a tool without requires_confirmation")
	}
	if got := string(ts.Tools[1].Annotations.Custom[AnnotationID]); got != `"mail.smtp_send"` {
		t.Errorf("second tool id annotation %s", got)
	}
}
