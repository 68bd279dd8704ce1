package conformance

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"
)

// MaxShownBody is how much of a message's body an Exchange keeps; the rest
// is cut and the cut said.
const MaxShownBody = 4 << 10

// Exchange is one HTTP request and its answer, as a check saw them, with
// credentials redacted and long bodies cut.
type Exchange struct {
	// Direction says who sent the request: "sent" for the kit's own
	// requests, "received" for requests the implementation sent to the kit.
	Direction string    `json:"direction"`
	At        time.Time `json:"at"`
	Method    string    `json:"method"`
	URL       string    `json:"url"`
	// Request and Response are the headers and body, as text.
	Request  string `json:"request"`
	Status   int    `json:"status,omitempty"`
	Response string `json:"response,omitempty"`
	// Err is the transport error when no answer came.
	Err string `json:"error,omitempty"`
}

// String renders the exchange for people, request above answer.
func (x Exchange) String() string {
	var b strings.Builder
	arrow := "→"
	if x.Direction == "received" {
		arrow = "←"
	}
	fmt.Fprintf(&b, "%s %s %s %s\n", x.At.Format("15:04:05.000"), arrow, x.Method, x.URL)
	writeIndented(&b, x.Request)
	switch {
	case x.Err != "":
		fmt.Fprintf(&b, "  error: %s\n", x.Err)
	case x.Status != 0:
		fmt.Fprintf(&b, "  answer %d\n", x.Status)
		writeIndented(&b, x.Response)
	}
	return b.String()
}

func writeIndented(b *strings.Builder, s string) {
	if s == "" {
		return
	}
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    ")
		b.WriteString(line)
		b.WriteByte('\n')
	}
}

// secretHeaders are the headers whose values an Exchange never shows.
var secretHeaders = map[string]bool{
	"Authorization":       true,
	"Proxy-Authorization": true,
	"Cookie":              true,
	"Set-Cookie":          true,
	"X-Api-Key":           true,
}

// RenderMessage renders headers and a body as an Exchange shows them:
// credentials redacted, the body cut at MaxShownBody.
func RenderMessage(h http.Header, body []byte) string {
	var b strings.Builder
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h[k] {
			if secretHeaders[http.CanonicalHeaderKey(k)] {
				v = "(redacted)"
			}
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	if len(body) > 0 {
		b.WriteByte('\n')
		if len(body) > MaxShownBody {
			fmt.Fprintf(&b, "%s… (cut at %d bytes)\n", body[:MaxShownBody], MaxShownBody)
		} else {
			b.Write(body)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// ReceivedExchange makes an Exchange of a request the implementation sent
// to the kit, and the status the kit answered.
func ReceivedExchange(r *http.Request, body []byte, status int) Exchange {
	return Exchange{
		Direction: "received", At: time.Now(), Method: r.Method, URL: r.URL.String(),
		Request: RenderMessage(r.Header, body), Status: status,
	}
}

// recorder is the transport of a T's client: it keeps every exchange with
// the check.
type recorder struct {
	base http.RoundTripper
	t    *T
}

func (rc *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	x := Exchange{Direction: "sent", At: time.Now(), Method: req.Method, URL: req.URL.String()}
	var reqBody []byte
	if req.Body != nil && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			reqBody, _ = io.ReadAll(io.LimitReader(body, MaxShownBody+1))
			body.Close()
		}
	}
	x.Request = RenderMessage(req.Header, reqBody)
	resp, err := rc.base.RoundTrip(req)
	if err != nil {
		x.Err = err.Error()
		rc.t.Record(x)
		return nil, err
	}
	x.Status = resp.StatusCode
	// Keep the start of the answer and hand the whole of it on.
	head, _ := io.ReadAll(io.LimitReader(resp.Body, MaxShownBody+1))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	x.Response = RenderMessage(resp.Header, head)
	rc.t.Record(x)
	return resp, nil
}
