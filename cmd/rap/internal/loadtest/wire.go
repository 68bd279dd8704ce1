package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator speaks HTTP/1.1 itself, on connections it opens before
// the clock starts, so that what it measures is the tool server: no
// transport goroutines hand the request and the response between them, no
// connection pool is consulted, and a send allocates nothing. Every worker
// owns one keep-alive connection.

// ackTarget is where and how invocations are sent.
type ackTarget struct {
	network, addr string // dial address, host:port
	tls           *tls.Config
	head          []byte // request line and headers, up to "Content-Length: "
	// bodyParts is the invocation's JSON split around its id's number,
	// which appears once or more (in the id and the callback URL).
	bodyParts [][]byte
}

// newAckTarget prepares the request template for endpoint.
func newAckTarget(endpoint, token string, body func(id string) []byte) (*ackTarget, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("the manifest's endpoint %q is not an absolute http(s) URL", endpoint)
	}
	t := &ackTarget{network: "tcp", addr: u.Host}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		t.addr = net.JoinHostPort(u.Hostname(), port)
	}
	if u.Scheme == "https" {
		t.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	}
	var h bytes.Buffer
	fmt.Fprintf(&h, "POST %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: rap-loadtest\r\nContent-Type: application/json\r\n", u.RequestURI(), u.Host)
	if token != "" {
		fmt.Fprintf(&h, "Authorization: Bearer %s\r\n", token)
	}
	h.WriteString("Content-Length: ")
	t.head = h.Bytes()
	// The body is built once with a marker id and split around it, so
	// that each send only writes its number in between.
	const marker = "RAPLOADTESTID9f3c"
	b := body(marker)
	t.bodyParts = bytes.Split(b, []byte(marker))
	if len(t.bodyParts) < 2 {
		return nil, errors.New("building the invocation template: the id marker is not there")
	}
	return t, nil
}

// ackConn is one keep-alive connection to the tool server, used by one
// worker at a time.
type ackConn struct {
	t   *ackTarget
	c   net.Conn
	br  *bufio.Reader
	req []byte // reused request buffer
	// deadline is the connection's read and write deadline, moved forward
	// only when less than half of ackTimeout is left, to save a call per
	// send.
	deadline time.Time
}

func (a *ackConn) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(ctx, a.t.network, a.t.addr)
	if err != nil {
		return err
	}
	if a.t.tls != nil {
		tc := tls.Client(c, a.t.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return err
		}
		c = tc
	}
	a.c = c
	a.deadline = time.Time{}
	if a.br == nil {
		a.br = bufio.NewReaderSize(c, 4096)
	} else {
		a.br.Reset(c)
	}
	return nil
}

func (a *ackConn) close() {
	if a.c != nil {
		a.c.Close()
		a.c = nil
	}
}

// ackTimeout bounds one exchange: a send fails when the answer takes
// longer than half of it at least, and all of it at most.
const ackTimeout = 30 * time.Second

// send posts invocation number n and reads the answer's status line and
// headers. d is the time from just before the request's bytes are written
// to just after the answer's header block has been read, which for an
// acknowledgement (200 with an empty body) is the whole answer. A
// connection that is not opened yet, or that broke, is opened before the
// clock starts. On a transport error the connection is closed.
func (a *ackConn) send(ctx context.Context, n int64) (d time.Duration, status int, err error) {
	if a.c == nil {
		if err := a.dial(ctx); err != nil {
			return 0, 0, err
		}
	}
	t := a.t
	var num [20]byte
	id := strconv.AppendInt(num[:0], n, 10)
	req := append(a.req[:0], t.head...)
	size := (len(t.bodyParts) - 1) * len(id)
	for _, p := range t.bodyParts {
		size += len(p)
	}
	req = strconv.AppendInt(req, int64(size), 10)
	req = append(req, "\r\n\r\n"...)
	for i, p := range t.bodyParts {
		if i > 0 {
			req = append(req, id...)
		}
		req = append(req, p...)
	}
	a.req = req
	if now := time.Now(); a.deadline.Sub(now) < ackTimeout/2 {
		a.deadline = now.Add(ackTimeout)
		if err := a.c.SetDeadline(a.deadline); err != nil {
			a.close()
			return 0, 0, err
		}
	}

	start := time.Now()
	if _, err := a.c.Write(req); err != nil {
		a.close()
		return 0, 0, err
	}
	status, length, chunked, keep, err := readResponseHead(a.br)
	d = time.Since(start)
	if err == nil {
		err = discardBody(a.br, status, length, chunked, &keep)
	}
	if err != nil {
		a.close()
		return 0, 0, err
	}
	if !keep {
		a.close()
	}
	return d, status, nil
}

var (
	errLineTooLong = errors.New("HTTP header line longer than 4 KiB")
	errBadResponse = errors.New("malformed HTTP response")
)

// readLine returns the next CRLF- or LF-terminated line without its end.
// The slice is valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, errLineTooLong
	}
	if err != nil {
		if err == io.EOF && len(line) == 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// headerFields reads header lines up to the blank line and reports the
// framing they declare: Content-Length (-1 when absent), chunked transfer
// coding, and whether the connection is to be closed.
func headerFields(br *bufio.Reader) (length int64, chunked, closing, expect bool, err error) {
	length = -1
	for {
		line, err := readLine(br)
		if err != nil {
			return 0, false, false, false, err
		}
		if len(line) == 0 {
			return length, chunked, closing, expect, nil
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return 0, false, false, false, errBadResponse
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, perr := strconv.ParseInt(string(value), 10, 64)
			if perr != nil || n < 0 {
				return 0, false, false, false, fmt.Errorf("bad Content-Length %q", value)
			}
			length = n
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			chunked = bytes.EqualFold(value, []byte("chunked"))
			if !chunked {
				return 0, false, false, false, fmt.Errorf("unsupported Transfer-Encoding %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")):
			closing = bytes.EqualFold(value, []byte("close"))
		case bytes.EqualFold(name, []byte("Expect")):
			expect = bytes.EqualFold(value, []byte("100-continue"))
		}
	}
}

// readResponseHead reads a response's status line and headers.
func readResponseHead(br *bufio.Reader) (status int, length int64, chunked, keep bool, err error) {
	line, err := readLine(br)
	if err != nil {
		return 0, 0, false, false, err
	}
	// "HTTP/1.1 200 OK"
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return 0, 0, false, false, errBadResponse
	}
	http10 := line[7] == '0'
	status, err = strconv.Atoi(string(line[9:12]))
	if err != nil || status < 200 {
		// 1xx interim answers are not expected: no request asks for one.
		return 0, 0, false, false, fmt.Errorf("unexpected status line %q", line)
	}
	length, chunked, closing, _, err := headerFields(br)
	if err != nil {
		return 0, 0, false, false, err
	}
	return status, length, chunked, !closing && !http10, nil
}

// discardBody reads and drops a response body. A body delimited by the end
// of the connection clears keep.
func discardBody(br *bufio.Reader, status int, length int64, chunked bool, keep *bool) error {
	switch {
	case status == 204 || status == 304:
		return nil
	case chunked:
		return discardChunked(br)
	case length >= 0:
		_, err := br.Discard(int(length))
		return err
	default:
		*keep = false
		_, err := io.Copy(io.Discard, br)
		return err
	}
}

// discardChunked drops a chunked body and its trailer.
func discardChunked(br *bufio.Reader) error {
	if _, err := io.Copy(io.Discard, httputil.NewChunkedReader(br)); err != nil {
		return err
	}
	return skipTrailer(br)
}

// skipTrailer reads the trailer section after a chunked body's last chunk.
func skipTrailer(br *bufio.Reader) error {
	for {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
	}
}

// callbackReceiver is the runtime's side of the callbacks: it accepts
// HTTP/1.1 POSTs on a loopback port, counts them, notes the ones whose body
// does not start with '{', and answers 200 with an empty body. It does no
// more than that, so that it takes as little as possible of the CPU the
// tool server shares with it.
type callbackReceiver struct {
	ln       net.Listener
	received atomic.Int64
	bad      atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newCallbackReceiver() (*callbackReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for callbacks: %w", err)
	}
	r := &callbackReceiver{ln: ln, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

func (r *callbackReceiver) url() string { return "http://" + r.ln.Addr().String() + "/cb" }

func (r *callbackReceiver) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.conns[c] = struct{}{}
		r.wg.Add(1)
		r.mu.Unlock()
		go r.serve(c)
	}
}

var (
	callbackOK       = []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	callbackContinue = []byte("HTTP/1.1 100 Continue\r\n\r\n")
	callbackRefused  = []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
)

// serve answers the requests of one connection until it closes.
func (r *callbackReceiver) serve(c net.Conn) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 4096)
	for {
		line, err := readLine(br)
		if err != nil || len(line) == 0 {
			return
		}
		http10 := bytes.HasSuffix(line, []byte("HTTP/1.0"))
		length, chunked, closing, expect, err := headerFields(br)
		if err != nil || (length < 0 && !chunked) {
			c.Write(callbackRefused) //nolint:errcheck // closing anyway
			return
		}
		if expect {
			if _, err := c.Write(callbackContinue); err != nil {
				return
			}
		}
		if chunked {
			body := httputil.NewChunkedReader(br)
			var first [1]byte
			if n, _ := io.ReadFull(body, first[:]); n == 0 || first[0] != '{' {
				r.bad.Add(1)
			}
			if _, err := io.Copy(io.Discard, body); err != nil {
				return
			}
			if err := skipTrailer(br); err != nil {
				return
			}
		} else {
			if first, err := br.Peek(1); length == 0 || (err == nil && first[0] != '{') {
				r.bad.Add(1)
			}
			if _, err := br.Discard(int(length)); err != nil {
				return
			}
		}
		r.received.Add(1)
		if _, err := c.Write(callbackOK); err != nil || closing || http10 {
			return
		}
	}
}

// close stops the receiver and closes its connections.
func (r *callbackReceiver) close() {
	r.ln.Close()
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}
