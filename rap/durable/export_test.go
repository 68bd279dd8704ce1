package durable

import "context"

// PragmaForTest reads a PRAGMA on one of the store's own connections.
func (s *Store) PragmaForTest(ctx context.Context, name string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v)
	return v, err
}
