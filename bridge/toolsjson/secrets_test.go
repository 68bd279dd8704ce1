package toolsjson

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const secretValue = "s3cr3t-Value-8f2a91"

// A secret reaches an exec tool (environment) and an http tool (header)
// and appears nowhere else: not in logs, traces, audit records, results
// or errors, even when the tool echoes it.
func TestSecretReachesToolAndNothingElse(t *testing.T) {
	okExec := writeScript(t, `test "$RUNLOOP_MAIL_KEY" = "`+secretValue+`" || { echo "no secret" >&2; exit 2; }
printf '{"echo":"key is %s"}' "$RUNLOOP_MAIL_KEY"`)
	leakExec := writeScript(t, `echo "oops $RUNLOOP_MAIL_KEY" >&2; exit 1`)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+secretValue {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/leak" {
			http.Error(w, "bad key "+r.Header.Get("Authorization"), http.StatusForbidden)
			return
		}
		fmt.Fprint(w, `{"sent":true}`)
	}))
	defer api.Close()
	withSecret := `,"secrets":["runloop/mail/key"]`
	hdr := `,"headers":{"Authorization":"Bearer ${secret:runloop/mail/key}"}`
	tools := bundleOf(
		strings.TrimSuffix(execTool("x.ok", okExec, ""), "}")+withSecret+"}",
		strings.TrimSuffix(execTool("x.leak", leakExec, ""), "}")+withSecret+"}",
		strings.TrimSuffix(httpTool("h.ok", "POST", api.URL+"/ok", hdr), "}")+withSecret+"}",
		strings.TrimSuffix(httpTool("h.leak", "POST", api.URL+"/leak", hdr), "}")+withSecret+"}",
	)
	dir := writeBundle(t, tools, "net:"+strings.TrimPrefix(api.URL, "http://")+"\n")
	traceDir := filepath.Join(t.TempDir(), "traces")
	env := map[string]string{"RUNLOOP_MAIL_KEY": secretValue}
	s := serveBundle(t, dir, Options{TraceDir: traceDir, Secrets: EnvResolver{Getenv: func(k string) string { return env[k] }}})

	var results []string
	r := s.invoke(t, "x_ok", map[string]any{"text": "x"})
	if r != `{"echo":"key is [REDACTED]"}` {
		t.Fatalf("exec result %q", r)
	}
	results = append(results, r)
	r = s.invoke(t, "x_leak", map[string]any{"text": "x"})
	mustContain(t, r, "Error: ", "oops [REDACTED]")
	results = append(results, r)
	r = s.invoke(t, "h_ok", map[string]any{"to": "x"})
	if r != `{"sent":true}` {
		t.Fatalf("http result %q (the header did not carry the secret)", r)
	}
	results = append(results, r)
	r = s.invoke(t, "h_leak", map[string]any{"to": "x"})
	mustContain(t, r, "Error: ", "403", "bad key Bearer [REDACTED]")
	results = append(results, r)

	trace, err := os.ReadFile(s.srv.TracePath())
	if err != nil {
		t.Fatal(err)
	}
	msgs := s.callbacks
	if len(msgs) != 4 {
		t.Fatalf("%d callbacks", len(msgs))
	}
	everything := map[string]string{
		"logs": s.logs.String(), "audit": s.audit.String(), "trace": string(trace),
		"results": strings.Join(results, "\n"), "callbacks": strings.Join(msgs, "\n"),
	}
	for name, text := range everything {
		if strings.Contains(text, secretValue) {
			t.Errorf("the secret appears in the %s:\n%s", name, text)
		}
	}
	if !strings.Contains(string(trace), "[REDACTED]") {
		t.Errorf("trace has no redacted result: %s", trace)
	}
}

// A secret that cannot be resolved gives an Error result and a cap_denied
// audit record, and the tool does not run.
func TestSecretResolutionFailure(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "ran")
	tool := writeScript(t, `touch `+marker+`; echo '{"echo":"x"}'`)
	dir := writeBundle(t, bundleOf(strings.TrimSuffix(execTool("x.s", tool, ""), "}")+`,"secrets":["vault/key"],"observability":{"tags":["ext"]}}`), "")
	s := serveBundle(t, dir, Options{Secrets: EnvResolver{Getenv: func(string) string { return "" }}})
	mustContain(t, s.invoke(t, "x_s", map[string]any{"text": "x"}), "Error: ", `secret "vault/key" is not available`)
	mustContain(t, s.audit.String(), `"kind":"cap_denied"`, `"tool_id":"x.s"`, `"secret":"vault/key"`, "VAULT_KEY is not set", `"tags":["ext"]`)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran without its secret")
	}
}

func TestSecretResolvers(t *testing.T) {
	ctx := context.Background()
	if EnvName("runloop/mail/smtp_api_key") != "RUNLOOP_MAIL_SMTP_API_KEY" {
		t.Fatal(EnvName("runloop/mail/smtp_api_key"))
	}
	p := filepath.Join(t.TempDir(), "secrets")
	mustWrite(t, p, "# mail\nrunloop/mail/key = "+secretValue+"\n", 0o644)
	_, err := FileResolver{Path: p}.Resolve(ctx, "runloop/mail/key")
	if err == nil || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), secretValue) {
		t.Fatalf("a group/world-readable secrets file was used: %v", err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := (FileResolver{Path: p}).Resolve(ctx, "runloop/mail/key"); err != nil || v != secretValue {
		t.Fatalf("file: %q %v", v, err)
	}
	if _, err := (FileResolver{Path: p}).Resolve(ctx, "other"); !errors.Is(err, ErrSecretNotFound) {
		t.Fatalf("file missing id: %v", err)
	}
	cmd := writeScript(t, `test "$1" = "a/b" && echo "`+secretValue+`"`)
	if v, err := (CommandResolver{Command: cmd}).Resolve(ctx, "a/b"); err != nil || v != secretValue {
		t.Fatalf("command: %q %v", v, err)
	}
	if _, err := (CommandResolver{Command: cmd}).Resolve(ctx, "c"); err == nil {
		t.Fatal("command: failing command resolved")
	}
	chain := ChainResolver{EnvResolver{Getenv: func(string) string { return "" }}, FileResolver{Path: p}}
	if v, err := chain.Resolve(ctx, "runloop/mail/key"); err != nil || v != secretValue {
		t.Fatalf("chain: %q %v", v, err)
	}
}

// A secret command that prints 100 MB is stopped once it passes 64 KiB and
// the lookup fails saying so; the resolver never buffers more.
func TestCommandResolverOutputCapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := CommandResolver{Command: writeScript(t, `head -c 100000000 /dev/zero`), Timeout: time.Minute}
	_, err := r.Resolve(ctx, "k")
	if err == nil || !strings.Contains(err.Error(), "printed more than 65536 bytes") {
		t.Fatalf("a secret command printing 100 MB: %v", err)
	}
}
