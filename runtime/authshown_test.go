package runtime

import (
	"fmt"
	"testing"
)

// At its cap the set of shown authorization links forgets its oldest
// link only: every newer one is still shown.
func TestShownAuthForgetsOldestFirst(t *testing.T) {
	s := newShownAuth(3)
	for i := range 5 {
		s.put("t", fmt.Sprint("c", i), Event{ThreadID: "t", Data: []byte(fmt.Sprint(i))})
	}
	got := s.thread("t")
	if len(got) != 3 || string(got[0].Data) != "2" || string(got[2].Data) != "4" || s.len() != 3 {
		t.Fatalf("kept %d events %v, want the 3 newest (2, 3, 4)", len(got), got)
	}
	s.put("u", "c0", Event{ThreadID: "u"})
	if got := s.thread("t"); len(got) != 2 || string(got[0].Data) != "3" {
		t.Fatalf("after one more link elsewhere: %v, want 3 and 4 kept", got)
	}
	s.forget("t", "c3")
	s.forget("t", "c4")
	if s.thread("t") != nil || len(s.byThread) != 1 || s.len() != 1 {
		t.Fatalf("forget left %d threads, %d events", len(s.byThread), s.len())
	}
	s.put("u", "c0", Event{ThreadID: "u", Data: []byte("again")})
	if got := s.thread("u"); len(got) != 1 || string(got[0].Data) != "again" || s.len() != 1 {
		t.Fatalf("replacing a link: %v (%d kept)", got, s.len())
	}
}
