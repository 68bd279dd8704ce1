package httpapi

// This file owns the callback endpoint tools post to (RAP TR-5 to TR-7):
// it checks the token before reading the bounded body, and answers what
// the Engine made of the message.

import (
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/propagation"

	"github.com/gorap/gorap/rap"
)

// CallbackPath is the path prefix of callback URLs; the token follows it.
const CallbackPath = "/rap/callback/"

// serveCallback is the callback endpoint: POST /rap/callback/{token}.
//
// Answers: 200 accepted (or a duplicate, or ignored); 400 an invalid
// message; 403 a forged token or a body for another call; 404 a call the
// runtime never had (RAP RE-5); 410 a subscription or thread that ended,
// or a view of a closed thread; 413 a body over rap.MaxCallbackBytes; 503
// with Retry-After when an early event cannot be held now (retry later).
func (s *server) serveCallback(w http.ResponseWriter, req *http.Request) {
	body := http.MaxBytesReader(w, req.Body, rap.MaxCallbackBytes)
	ctx := req.Context()
	if req.Header.Get("Traceparent") != "" {
		// The span context the tool sent back (docs/observability.md):
		// the engine links its callback span to it.
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(req.Header))
	}
	out := s.e.DeliverCallback(ctx, req.PathValue("token"), body, req.Header.Get(rap.IdempotencyKeyHeader))
	if out.TokenRefused {
		// RAP RE-5, TR-7: forged or mangled tokens change nothing.
		s.opts.Log.Warn("callback refused: invalid token", "remote", req.RemoteAddr)
	}
	if out.Status != http.StatusOK {
		if out.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(out.RetryAfter))
		}
		writeError(w, out.Status, out.Message)
		return
	}
	writeJSON(w, http.StatusOK, callbackAnswer{Status: out.Message})
}

// callbackAnswer is the body of a 200 answer to a callback: the same JSON
// as a one-key map, encoded without the map's allocations and key sort.
type callbackAnswer struct {
	Status string `json:"status"`
}
