package httpapi

// This file owns GET /metrics on the client API's address: the metrics
// handler of Options.Metrics behind the client API's authentication, for
// admin callers only.

import (
	"net/http"

	"github.com/gorap/gorap/runtime/api"
)

// MetricsPath is where New serves Options.Metrics.
const MetricsPath = "/metrics"

// errMetricsNotAdmin is the answer to a caller bound to one user.
const errMetricsNotAdmin = "the metrics count every user's sessions: they need an admin token, not one bound to a user"

// serveMetrics serves the metrics to a caller that is not bound to one
// user (no Caller, or an admin).
func (s *server) serveMetrics(w http.ResponseWriter, req *http.Request) {
	if _, scoped := api.ScopedUser(req.Context()); scoped {
		writeError(w, http.StatusForbidden, errMetricsNotAdmin)
		return
	}
	s.opts.Metrics.ServeHTTP(w, req)
}
