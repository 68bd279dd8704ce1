package store

import "github.com/google/uuid"

// NewThreadID returns a new thread id: a time-ordered UUID (RFC 9562
// version 7, 48 bits of milliseconds then 74 random bits) in its usual
// text form. Ids made by one process sort in the order they were made, so
// a new thread's rows land at the end of every index keyed by thread id
// instead of at a random page: creating a thread costs the same whether
// the store holds a thousand threads or a million. The
// runtime uses it for every thread it creates; a store accepts any id.
func NewThreadID() string {
	// NewV7 fails only when the system's random source does; Must panics
	// then, as uuid.NewString (version 4) did before.
	return uuid.Must(uuid.NewV7()).String()
}
