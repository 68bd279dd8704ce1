package backend

import (
	"errors"
	"fmt"

	"github.com/gorap/gorap/runtime/store"
)

// The history walk: a child thread's history is its parent's up to the
// child's InheritSeq (recursively, the parent's own inheritance first),
// then the child's own messages, whose Seqs continue from it. The
// inherited part is read from the ancestors, never copied.

// MaxInheritDepth bounds the ancestor chain the walk follows: a longer
// one can only be a cycle in the store.
const MaxInheritDepth = 1000

// HistoryReader is what the walk reads of a store inside one transaction.
type HistoryReader interface {
	ThreadReader
	// OwnMessages returns the messages stored under threadID itself (not
	// the inherited ones) whose Seq is above after and at most upTo (no
	// upper bound when upTo is negative), in Seq order.
	OwnMessages(threadID string, after, upTo int64) ([]store.Message, error)
}

// History implements store.Messages.History on r: the inherited prefix,
// then the thread's own messages. An unknown thread has an empty history.
func History(r HistoryReader, threadID string) ([]store.Message, error) {
	return history(r, threadID, -1, 0)
}

// HistorySince implements store.Messages.HistorySince on r. The thread's
// own messages after `after` are read first; only when they do not start
// right after it can inherited messages be missing, and only then is the
// inherited prefix read.
func HistorySince(r HistoryReader, threadID string, after int64) ([]store.Message, error) {
	own, err := r.OwnMessages(threadID, after, -1)
	if err != nil || (len(own) > 0 && own[0].Seq == after+1) {
		return own, err
	}
	_, inherit, err := inheritance(r, threadID)
	if err != nil {
		return nil, err
	}
	if after >= inherit {
		return own, nil
	}
	all, err := History(r, threadID)
	if err != nil {
		return nil, err
	}
	i := 0
	for i < len(all) && all[i].Seq <= after {
		i++
	}
	return all[i:], nil
}

// history returns the thread's messages with Seq <= upTo (all when upTo
// is negative), depth levels below the thread History was asked for.
func history(r HistoryReader, threadID string, upTo int64, depth int) ([]store.Message, error) {
	if depth > MaxInheritDepth {
		return nil, fmt.Errorf("read history of thread %s: more than %d inherited levels (a cycle in the store?)", threadID, MaxInheritDepth)
	}
	parent, inherit, err := inheritance(r, threadID)
	if err != nil {
		return nil, err
	}
	var out []store.Message
	if parent != "" && inherit > 0 {
		limit := inherit
		if upTo >= 0 {
			limit = min(limit, upTo)
		}
		if out, err = history(r, parent, limit, depth+1); err != nil {
			return nil, err
		}
	}
	own, err := r.OwnMessages(threadID, 0, upTo)
	if err != nil {
		return nil, err
	}
	return append(out, own...), nil
}

// inheritance returns the thread's parent and InheritSeq; an unknown
// thread inherits nothing.
func inheritance(r HistoryReader, threadID string) (parent string, inheritSeq int64, err error) {
	th, err := r.Thread(threadID)
	if errors.Is(err, store.ErrNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read history of thread %s: %w", threadID, err)
	}
	return th.ParentID, th.InheritSeq, nil
}
