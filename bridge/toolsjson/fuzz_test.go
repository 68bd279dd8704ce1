package toolsjson

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary tools.json documents to Load: it must never
// panic, and a bundle it accepts must hold only valid, uniquely named
// tools with absolute exec commands.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(validTools))
	f.Add([]byte(`{"version":1,"tools":[]}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"tools":[{"id":"a","description":"d","transport":{"kind":"http","method":"GET","url":"http://h/{x}?q={y}"},"input_schema":{"$ref":"schema:a"},"result_schema":{"type":"object"},"schema_refs":{"a":{"$ref":"schema:a"}}}]}`))
	dir := f.TempDir()
	if err := os.WriteFile(filepath.Join(dir, PolicyFile), []byte("net:*\nfs:*\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	// Load is reading tools.json, manifest.toml and policy.caps, then
	// check. The two siblings never change here, so they are read once
	// and each input goes straight to check: no file is written or read
	// per input, and an input that is not even JSON costs microseconds.
	// That matters beyond speed: each input that finds new code is
	// minimized by trying up to ~len² shorter variants (for up to
	// -fuzzminimizetime, 60 s by default), and while a worker minimizes it
	// explores nothing and reports no executions.
	sib := readSiblings(dir)
	if sib.policyErr != nil {
		f.Fatal(sib.policyErr)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := sib.check(data, LoadOptions{AllowUnsigned: true})
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, tl := range b.Tools {
			if names[tl.Name] || strings.Contains(tl.Name, ".") || tl.Name == "" {
				t.Fatalf("bad or duplicate name %q", tl.Name)
			}
			names[tl.Name] = true
			if tl.Transport.Kind == "exec" && !filepath.IsAbs(tl.Transport.Command) {
				t.Fatalf("relative command %q accepted", tl.Transport.Command)
			}
			if tl.input == nil || tl.result == nil || !json.Valid(tl.InputSchema) {
				t.Fatal("tool without compiled schemas")
			}
			_ = rapTool(tl)
		}
	})
}

// FuzzURLTemplate expands templates with arbitrary values: the result is
// always a valid URL with the template's scheme and host, a value never
// adds a path segment, a "." or ".." segment, or a query parameter of its
// own.
func FuzzURLTemplate(f *testing.F) {
	f.Add("https://api.example/send/{to}?n={n}", "a/b?c=d&e#f", "x y")
	f.Add("http://127.0.0.1:8080/{a}/{b}", "..", "%2F")
	f.Add("https://h.example/{a}", "@evil.example", "")
	f.Add("https://h.example/x/%2E{a}/{b}", ".", "%2e.")
	f.Fuzz(func(t *testing.T, tmpl, a, b string) {
		ut, err := ParseURLTemplate(tmpl)
		if err != nil {
			return
		}
		in := map[string]string{}
		for i, fld := range ut.Fields {
			if i%2 == 0 {
				in[fld] = a
			} else {
				in[fld] = b
			}
		}
		raw, _ := json.Marshal(in)
		out, err := ut.Expand(raw)
		if errors.Is(err, ErrDotSegment) {
			return
		}
		if err != nil {
			t.Fatalf("Expand(%q): %v", tmpl, err)
		}
		want, err := url.Parse(strings.NewReplacer("{", "", "}", "").Replace(tmpl))
		if err != nil {
			return
		}
		got, err := url.Parse(out)
		if err != nil {
			t.Fatalf("expanded %q is not a URL: %v", out, err)
		}
		if got.Scheme != want.Scheme || got.Host != want.Host {
			t.Fatalf("template %q with %q/%q went to %s://%s", tmpl, a, b, got.Scheme, got.Host)
		}
		if strings.Count(got.EscapedPath(), "/") != strings.Count(want.EscapedPath(), "/") {
			t.Fatalf("a value added path segments: %q -> %q", tmpl, out)
		}
		if dotSegments(got.EscapedPath()) != dotSegments(want.EscapedPath()) {
			t.Fatalf("a value made a dot segment: %q with %q/%q -> %q", tmpl, a, b, out)
		}
		if got.Fragment != "" || strings.Count(got.RawQuery, "&") != strings.Count(want.RawQuery, "&") {
			t.Fatalf("a value changed the query or fragment: %q -> %q", tmpl, out)
		}
	})
}

// dotSegments counts the segments of an escaped path that read "." or
// ".." once decoded.
func dotSegments(p string) int {
	n := 0
	for _, seg := range strings.Split(p, "/") {
		if d, err := url.PathUnescape(seg); err == nil && (d == "." || d == "..") {
			n++
		}
	}
	return n
}
