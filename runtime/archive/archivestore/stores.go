package archivestore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/store"
)

// pageSize is how many threads Export reads per page when it lists every
// session of a store.
const pageSize = 500

// Export writes sessions of st to w, each read in a transaction of its
// own: those whose root ids are given, or, when roots is empty, every
// session whose root thread keep accepts (keep nil accepts all), oldest
// first. A root that is not a session is an error wrapping
// store.ErrNotFound, before anything of it is written. It does not Close
// w.
func Export(ctx context.Context, st store.Store, w *archive.Writer, roots []string, keep func(store.Thread) bool) error {
	one := func(root string) error {
		var s *archive.Session
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			s, err = ReadSession(tx, root)
			return err
		})
		if err != nil {
			return err
		}
		return w.WriteSession(s)
	}
	if len(roots) > 0 {
		for _, root := range roots {
			if err := one(root); err != nil {
				return err
			}
		}
		return nil
	}
	var cursor store.ThreadCursor
	for {
		var page []store.Thread
		err := st.View(ctx, func(tx store.Tx) error {
			var err error
			page, err = tx.ThreadsPage(cursor, pageSize)
			return err
		})
		if err != nil {
			return err
		}
		for _, th := range page {
			if th.ParentID != "" || (keep != nil && !keep(th)) {
				continue
			}
			if err := one(th.ID); err != nil && !errors.Is(err, store.ErrNotFound) { // deleted meanwhile
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		cursor = store.CursorOf(page[len(page)-1])
	}
}

// Import writes every session of r into st, each in a transaction of its
// own (WriteSession), and returns the roots it imported. before, when not
// nil, runs in each session's transaction first and may refuse the
// session. At the first session it cannot read or write it stops and
// returns the roots imported before it with the error: those stay
// imported, and nothing of the failed one is.
func Import(ctx context.Context, st store.Store, r *archive.Reader, before func(tx store.Tx, s *archive.Session) error) ([]string, error) {
	var done []string
	for {
		s, err := r.Next()
		if errors.Is(err, io.EOF) {
			return done, nil
		}
		if err != nil {
			return done, err
		}
		err = st.Update(ctx, func(tx store.Tx) error {
			if before != nil {
				if err := before(tx, s); err != nil {
					return err
				}
			}
			return WriteSession(tx, s)
		})
		if err != nil {
			return done, fmt.Errorf("import session %s: %w", s.Root, err)
		}
		done = append(done, s.Root)
	}
}
