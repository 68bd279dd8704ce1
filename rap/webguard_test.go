package rap_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// rawPost sends one request exactly as written to addr and returns the
// status and body.
func rawPost(t *testing.T, addr, host string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "POST / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Length: %d\r\n", host, len(body))
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// No web page can make a browser invoke a tool of a tool server on
// 127.0.0.1: not from another site (text/plain, forms, any foreign
// Origin), and not under a DNS name rebound to 127.0.0.1. Runtimes, which
// send JSON and no browser headers, are served, with or without a
// Content-Type; a bearer token lifts the host check.
func TestToolServerRefusesWebPages(t *testing.T) {
	for _, token := range []string{"", "tok"} {
		sink := newSDKSink(t)
		ran := make(chan string, 16)
		s := rap.NewServer("notes", &rap.ServerOptions{BearerToken: token})
		rap.AddTool(s, &rap.Tool{Name: "echo", Description: "Echoes."},
			func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
				ran <- c.Invocation.ID
				return rap.Text("ok"), nil
			})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = s.Serve(context.Background(), ln) }()
		t.Cleanup(func() { ln.Close() })
		addr := ln.Addr().String()
		inv := func(id string) string { return string(sdkInvocation("echo", id, "g", sink.URL(), nil)) }
		auth := map[string]string{}
		if token != "" {
			auth["Authorization"] = "Bearer " + token
		}
		with := func(kv ...string) map[string]string {
			m := map[string]string{}
			for k, v := range auth {
				m[k] = v
			}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		refused := []struct {
			name, host string
			hdr        map[string]string
			want       int
		}{
			{"text/plain from another site", addr, with("Content-Type", "text/plain", "Origin", "https://evil.example"), 403},
			{"text/plain", addr, with("Content-Type", "text/plain"), 415},
			{"form", addr, with("Content-Type", "application/x-www-form-urlencoded"), 415},
			{"cross-site fetch", addr, with("Content-Type", "application/json", "Sec-Fetch-Site", "cross-site"), 403},
			{"no content type from a page", addr, with("Origin", "http://127.0.0.1:1"), 403},
		}
		if token == "" {
			refused = append(refused, struct {
				name, host string
				hdr        map[string]string
				want       int
			}{"rebound name", "evil.example:" + strings.Split(addr, ":")[1], with("Content-Type", "application/json"), 403})
		}
		for i, c := range refused {
			if status, body := rawPost(t, addr, c.host, c.hdr, inv(fmt.Sprint("bad", i))); status != c.want {
				t.Errorf("token %q, %s: %d %s; want %d", token, c.name, status, body, c.want)
			}
		}
		select {
		case id := <-ran:
			t.Fatalf("token %q: a refused request ran the tool (%s)", token, id)
		default:
		}
		for i, c := range []struct {
			name, host string
			hdr        map[string]string
		}{
			{"a runtime", addr, with("Content-Type", "application/json")},
			{"a runtime without Content-Type", addr, with()},
			{"localhost", "localhost:" + strings.Split(addr, ":")[1], with("Content-Type", "application/json")},
		} {
			if status, body := rawPost(t, addr, c.host, c.hdr, inv(fmt.Sprint("ok", i))); status != 200 {
				t.Errorf("token %q, %s: %d %s; want 200", token, c.name, status, body)
			}
		}
		if token != "" {
			if status, body := rawPost(t, addr, "tools.cluster.svc", with("Content-Type", "application/json"), inv("ok-name")); status != 200 {
				t.Errorf("with a token, a cluster name: %d %s; want 200", status, body)
			}
		}
	}
}
