package rap

// NewMemoryOutboxForTest returns the in-memory outbox of a Server without
// a Store, for tests of the external package.
func NewMemoryOutboxForTest() Outbox { return newMemoryOutbox() }
