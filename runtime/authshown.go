package runtime

import "container/list"

// shownAuth keeps, in memory, the oauth events of calls still waiting for
// their result, so that a client connecting meanwhile is shown the link
// (RAP OA-1). It holds at most max events; past that it forgets the
// oldest one, never the rest. Its owner (localEvents) serializes its
// methods.
type shownAuth struct {
	max      int
	order    *list.List // of *shownEvent, oldest first
	byThread map[string]map[string]*list.Element
}

type shownEvent struct {
	thread, call string
	event        Event
}

func newShownAuth(max int) *shownAuth {
	return &shownAuth{max: max, order: list.New(), byThread: map[string]map[string]*list.Element{}}
}

// put keeps e as the event of (thread, call), replacing an earlier one.
func (s *shownAuth) put(thread, call string, e Event) {
	s.forget(thread, call)
	for s.order.Len() >= s.max {
		old := s.order.Front().Value.(*shownEvent)
		s.forget(old.thread, old.call)
	}
	calls := s.byThread[thread]
	if calls == nil {
		calls = map[string]*list.Element{}
		s.byThread[thread] = calls
	}
	calls[call] = s.order.PushBack(&shownEvent{thread: thread, call: call, event: e})
}

// forget drops the event of (thread, call), if any.
func (s *shownAuth) forget(thread, call string) {
	calls := s.byThread[thread]
	el := calls[call]
	if el == nil {
		return
	}
	s.order.Remove(el)
	delete(calls, call)
	if len(calls) == 0 {
		delete(s.byThread, thread)
	}
}

// forgetThread drops the events of every call of thread.
func (s *shownAuth) forgetThread(thread string) {
	for _, el := range s.byThread[thread] {
		s.order.Remove(el)
	}
	delete(s.byThread, thread)
}

// thread returns the events kept for thread, oldest first.
func (s *shownAuth) thread(thread string) []Event {
	calls := s.byThread[thread]
	if len(calls) == 0 {
		return nil
	}
	out := make([]Event, 0, len(calls))
	for el := s.order.Front(); el != nil && len(out) < len(calls); el = el.Next() {
		if se := el.Value.(*shownEvent); se.thread == thread {
			out = append(out, se.event)
		}
	}
	return out
}

// len returns how many events are kept.
func (s *shownAuth) len() int { return s.order.Len() }
