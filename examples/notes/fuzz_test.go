package notes

import (
	"path/filepath"
	"testing"
)

// FuzzDecodeImport decodes arbitrary import bodies: decoding never panics,
// and what it accepts is a usable session id with notes within a
// session's limits, whose file lies in the notes directory.
func FuzzDecodeImport(f *testing.F) {
	for _, seed := range []string{
		`{"session_id":"root","notes":["a","b"]}`, `{"session_id":"../x","notes":["a"]}`,
		`{"session_id":"","notes":["a"]}`, `{"session_id":"a\u0000","notes":["a"]}`,
		`{"session_id":"r","notes":[]}`, `{"session_id":"r","notes":null}`, `{"session_id":"r","notes":[""]}`,
		`{"session_id":"r","notes":["a\nb"]}`, `{"session_id":"r","session_id":"s","notes":["a"]}`,
		`{"session_id":"r","notes":["a"]} {}`, `null`, `[]`, `{"session_id":7}`,
	} {
		f.Add([]byte(seed))
	}
	st := &store{dir: "/notes"}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := decodeImport(data)
		if err != nil {
			return
		}
		if checkSessionID(in.SessionID) != nil || len(in.Notes) == 0 || checkNotes(in.Notes) != nil {
			t.Fatalf("accepted %+v from %s", in, data)
		}
		if p := st.path(in.SessionID); filepath.Dir(p) != "/notes" {
			t.Fatalf("session %q has its file at %s", in.SessionID, p)
		}
	})
}
