package anthropic

import "testing"

// setMembers replaces the values of members an object has, in place, adds
// those it lacks at its end, and keeps every other byte.
func TestSetMembersKeepsEveryOtherByte(t *testing.T) {
	set := []member{{"content", []byte(`"S"`)}, {"signature", []byte(`"G"`)}}
	for in, want := range map[string]string{
		`{}`:                                `{"content":"S","signature":"G"}`,
		` { } `:                             ` { "content":"S","signature":"G"}`,
		`{"type":"compaction"}`:             `{"type":"compaction","content":"S","signature":"G"}`,
		`{ "content" : null , "x":[1, 2] }`: `{ "content" : "S" , "x":[1, 2] ,"signature":"G"}`,
		`{"signature":"a","content":"b","type":1}`: `{"signature":"G","content":"S","type":1}`,
	} {
		got, err := setMembers([]byte(in), set)
		if err != nil || string(got) != want {
			t.Errorf("setMembers(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{`[]`, `"x"`, `{"a":}`, `{"a":1} x`} {
		if _, err := setMembers([]byte(bad), set); err == nil {
			t.Errorf("setMembers(%s): want an error", bad)
		}
	}
}
