package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/clientauth"
)

// apiCall sends one client API request with a bearer token.
func apiCall(t *testing.T, hc *http.Client, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tokenAdd runs "rap token add" and returns the token it printed.
func tokenAdd(t *testing.T, file string, args ...string) string {
	t.Helper()
	var out, errOut syncBuffer
	if code := run(context.Background(), append([]string{"token", "add", "--tokens-file", file}, args...), &out, &errOut); code != 0 {
		t.Fatalf("rap token add %v: exit %d: %s", args, code, errOut.String())
	}
	tok := strings.TrimSpace(out.String())
	if !strings.HasPrefix(tok, "rap_") || len(tok) != 68 {
		t.Fatalf("rap token add printed %q, want one rap_ token", out.String())
	}
	return tok
}

// Client tokens bound to users: each user sees only their own sessions,
// an admin sees all, a token added while rap serve runs works within
// seconds and a removed one stops working, and no token reaches the output.
func TestServeUserTokens(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "conf", "tokens.toml")
	alice := tokenAdd(t, file, "--user", "alice", "--name", "alice-laptop")
	admin := tokenAdd(t, file, "--admin")
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("tokens file mode: %v %v, want 0600", fi.Mode(), err)
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), alice) {
		t.Fatal("the tokens file holds a token, not its digest")
	}
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir))
	s.TokensFile = file
	s.Listen = "0.0.0.0:0" // a tokens file is enough to serve beyond loopback
	info, stdout, stderr, stop := runningServe(t, s)
	base := strings.Replace(info.URL, "0.0.0.0", "127.0.0.1", 1) + "/v1"
	hc := http.DefaultClient

	status, body := apiCall(t, hc, "POST", base+"/threads", alice, `{}`)
	if status != http.StatusCreated {
		t.Fatalf("alice creates a session: %d %s", status, body)
	}
	var a1 struct{ ID string }
	json.Unmarshal([]byte(body), &a1)

	// bob is added while rap serve runs.
	bob := tokenAdd(t, file, "--user", "bob")
	var b1 struct{ ID string }
	deadline := time.Now().Add(20 * time.Second)
	for {
		status, body = apiCall(t, hc, "POST", base+"/threads", bob, `{}`)
		if status == http.StatusCreated || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != http.StatusCreated {
		t.Fatalf("bob's token, added while serving, was not accepted: %d %s", status, body)
	}
	json.Unmarshal([]byte(body), &b1)

	if status, _ := apiCall(t, hc, "GET", base+"/threads/"+b1.ID, alice, ""); status != http.StatusNotFound {
		t.Errorf("alice reads bob's session: %d, want 404", status)
	}
	count := func(token string) int {
		status, body := apiCall(t, hc, "GET", base+"/threads", token, "")
		if status != http.StatusOK {
			t.Fatalf("list: %d %s", status, body)
		}
		var page struct{ Threads []json.RawMessage }
		json.Unmarshal([]byte(body), &page)
		return len(page.Threads)
	}
	if n := count(alice); n != 1 {
		t.Errorf("alice lists %d sessions, want 1", n)
	}
	if n := count(admin); n != 2 {
		t.Errorf("the admin lists %d sessions, want 2", n)
	}

	// Revoke alice: rewrite the file without her entry.
	b, _ := os.ReadFile(file)
	kept := strings.SplitN(string(b), "[[tokens]]", 3)
	if len(kept) != 3 {
		t.Fatalf("unexpected tokens file:\n%s", b)
	}
	if err := os.WriteFile(file+".new", []byte("[[tokens]]"+strings.Join(kept[2:], "[[tokens]]")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".new", file); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		status, _ = apiCall(t, hc, "GET", base+"/threads", alice, "")
		if status == http.StatusUnauthorized || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != http.StatusUnauthorized {
		t.Errorf("alice's revoked token still answered %d", status)
	}
	if status, _ := apiCall(t, hc, "GET", base+"/threads/"+b1.ID, bob, ""); status != http.StatusOK {
		t.Errorf("bob after alice's revocation: %d", status)
	}
	stop()
	for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
		for _, tok := range []string{alice, bob, admin} {
			if strings.Contains(out, tok) {
				t.Errorf("%s contains a client token", name)
			}
		}
	}
	if !strings.Contains(stdout.String(), "tokens.toml") {
		t.Errorf("the banner does not name the tokens file:\n%s", stdout)
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key (0600) and
// returns their paths and a pool that trusts the certificate.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rap test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// With --tls-cert and --tls-key rap serve speaks HTTPS only, and its
// callback URLs say https; a key every user may read is refused.
func TestServeTLS(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir))
	s.TLSCert, s.TLSKey = certFile, keyFile
	info, _, _, _ := runningServe(t, s)
	if !strings.HasPrefix(info.URL, "https://") || !strings.HasPrefix(info.PublicURL, "https://") {
		t.Fatalf("URLs %s and %s, want https", info.URL, info.PublicURL)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if status, body := apiCall(t, hc, "POST", info.URL+"/v1/threads", "", `{}`); status != http.StatusCreated {
		t.Fatalf("create over HTTPS: %d %s", status, body)
	}
	if _, err := http.Get(strings.Replace(info.URL, "https://", "http://", 1) + "/v1/threads"); err == nil {
		// net/http answers plain HTTP on a TLS port with 400; either way
		// nothing is served in the clear.
		resp, _ := http.Get(strings.Replace(info.URL, "https://", "http://", 1) + "/v1/threads")
		if resp != nil && resp.StatusCode == http.StatusOK {
			t.Fatal("the API answered plain HTTP")
		}
	}

	os.Chmod(keyFile, 0o644)
	err := serve(context.Background(), s, &syncBuffer{}, &syncBuffer{}, func(*server) { t.Error("served with a world-readable key") })
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key: %v, want a refusal saying chmod 600", err)
	}
}

// Behind a reverse proxy that passes its own host name (the recipe in
// docs/security.md), the web UI and the API work once that name is
// allowed, and are refused under it before.
func TestServeBehindReverseProxy(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	s := baseSettings(t, "scripted:"+writeScript(t, dir, tokyoScript), writeConfig(t, dir))
	s.AllowedHosts = []string{"agent.example.com"}
	info, _, _, _ := runningServe(t, s)
	upstream, _ := url.Parse(info.URL)
	proxy := func(host string) *http.Server {
		rp := &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(upstream)
				r.Out.Host = host // as nginx's proxy_set_header Host $host
				r.SetXForwarded()
			},
			FlushInterval: -1, // as nginx's proxy_buffering off, for event streams
		}
		return &http.Server{Handler: rp, ReadHeaderTimeout: 5 * time.Second}
	}
	for host, ok := range map[string]bool{"agent.example.com": true, "other.example.com": false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := proxy(host)
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		front := "http://" + ln.Addr().String()
		status, body := apiCall(t, http.DefaultClient, "GET", front+"/", "", "")
		if ok != (status == http.StatusOK && strings.Contains(body, "<html")) {
			t.Errorf("web UI through a proxy passing Host %s: %d", host, status)
		}
		req, _ := http.NewRequest("POST", front+"/v1/threads", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://"+host) // the page, served over the proxy's TLS
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ok != (resp.StatusCode == http.StatusCreated) {
			t.Errorf("create a session through a proxy passing Host %s: %d", host, resp.StatusCode)
		}
	}
}

// Concurrent "rap token add" runs each add their entry: none is lost.
func TestTokenAddConcurrent(t *testing.T) {
	file := filepath.Join(t.TempDir(), "tokens.toml")
	const n = 8
	tokens := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := addToken(file, clientauth.Entry{User: fmt.Sprint("user", i)})
			if err != nil {
				t.Error(err)
				return
			}
			tokens <- tok
		}()
	}
	wg.Wait()
	close(tokens)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	set, err := clientauth.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != n {
		t.Fatalf("%d entries after %d concurrent adds", len(set), n)
	}
	a, err := clientauth.New("", file, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for tok := range tokens {
		if _, ok := a.Authenticate("Bearer " + tok); !ok {
			t.Errorf("a token printed by rap token add is not in the file")
		}
	}
}
