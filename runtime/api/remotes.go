package api

// This file holds the wire types a client reads before and after moving a
// session: the runtimes it may name as a destination, and where a session
// that moved away went.

// RemotesResponse is the answer to GET /v1/remotes: the names of the
// runtimes this one may move sessions to by name (MoveRequest.To). It
// never carries their URLs or tokens.
type RemotesResponse struct {
	// Remotes are the names, sorted; empty when none are configured.
	Remotes []string `json:"remotes"`
}

// MovedToResponse is the answer to GET /v1/moved/{id} for a thread whose
// session moved to another runtime.
type MovedToResponse struct {
	// MovedTo is the base URL of the runtime the session moved to.
	MovedTo string `json:"moved_to"`
}
