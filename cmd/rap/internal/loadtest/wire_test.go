package loadtest

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
)

// The callback receiver takes what an HTTP client may send: a body with a
// length, a chunked body, and a request asking to close; it counts each
// and flags bodies that are not JSON objects.
func TestCallbackReceiver(t *testing.T) {
	r, err := newCallbackReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	post := func(body io.Reader) {
		t.Helper()
		resp, err := http.Post(r.url(), "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	post(strings.NewReader(`{"type":"tool_result"}`))
	post(io.MultiReader(strings.NewReader(`{"type":`), strings.NewReader(`"x"}`))) // chunked: no length known
	post(strings.NewReader(`[1]`))
	post(io.MultiReader(strings.NewReader(`nope`)))
	if got, bad := r.received.Load(), r.bad.Load(); got != 4 || bad != 2 {
		t.Errorf("received %d, bad %d; want 4 and 2", got, bad)
	}
}

// readResponseHead and discardBody frame every kind of answer, so that a
// kept-alive connection stays in step.
func TestReadResponseHead(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n" +
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\nRetry-After: 1\r\n\r\nbusy!" +
		"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\nTrailer: X\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\n" +
		"HTTP/1.1 401 Unauthorized\r\nconnection: close\r\ncontent-length: 2\r\n\r\nno"
	br := bufio.NewReader(strings.NewReader(in))
	for _, want := range []struct {
		status int
		keep   bool
	}{{200, true}, {503, true}, {400, true}, {401, false}} {
		status, length, chunked, keep, err := readResponseHead(br)
		if err == nil {
			err = discardBody(br, status, length, chunked, &keep)
		}
		if err != nil || status != want.status || keep != want.keep {
			t.Fatalf("got %d keep=%v err=%v, want %d keep=%v", status, keep, err, want.status, want.keep)
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("bytes left over: %v", err)
	}
	if _, _, _, _, err := readResponseHead(bufio.NewReader(strings.NewReader("SSH-2.0-x\r\n\r\n"))); err == nil {
		t.Error("a non-HTTP answer was accepted")
	}
}
