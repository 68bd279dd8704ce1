package runtime

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzVerifyToken: no input panics, and the only tokens accepted are the
// ones the runtime made (RAP TR-7, RE-5).
func FuzzVerifyToken(f *testing.F) {
	r := &Runtime{cfg: Config{Secret: []byte("0123456789abcdef0123456789abcdef")}}
	f.Add(r.callbackToken("thread-1", "call_1"))
	f.Add("a.b.c")
	f.Add("..")
	f.Add(strings.Repeat("A", 3000))
	f.Fuzz(func(t *testing.T, tok string) {
		th, c, err := r.verifyToken(tok)
		if err != nil {
			return
		}
		if r.callbackToken(th, c) != tok {
			t.Fatalf("accepted %q for (%q, %q), which the runtime never made", tok, th, c)
		}
	})
}

// Tokens bind both ids: changing either one invalidates the MAC.
func TestTokenBindsThreadAndCall(t *testing.T) {
	r := &Runtime{cfg: Config{Secret: []byte("0123456789abcdef0123456789abcdef")}}
	tok := r.callbackToken("t1", "c1")
	if th, c, err := r.verifyToken(tok); err != nil || th != "t1" || c != "c1" {
		t.Fatalf("verify own token: %q %q %v", th, c, err)
	}
	parts := strings.Split(tok, ".")
	other := strings.Split(r.callbackToken("t2", "c2"), ".")
	for _, forged := range []string{
		other[0] + "." + parts[1] + "." + parts[2],
		parts[0] + "." + other[1] + "." + parts[2],
		parts[0] + "." + parts[1] + "." + other[2],
		tok + ".x",
		"",
	} {
		if _, _, err := r.verifyToken(forged); err == nil {
			t.Errorf("forged token %q accepted", forged)
		}
	}
}

// FuzzSleepArguments feeds arbitrary arguments to sleep and sleep_until:
// they never panic, and an accepted call is due within MaxSleep.
func FuzzSleepArguments(f *testing.F) {
	f.Add(`{"seconds": 5}`, true)
	f.Add(`{"seconds": -1}`, true)
	f.Add(`{"seconds": 1e308}`, true)
	f.Add(`{"date":"2030-01-01","time":"09:30","timezone":"Europe/Paris"}`, false)
	f.Add(`{"date":"2030-02-30","time":"25:00"}`, false)
	f.Add(`{"date":"2030-01-01","time":"09:30","timezone":"../../etc/passwd"}`, false)
	now := time.Date(2026, 11, 22, 6, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, args string, plain bool) {
		name := BuiltinSleepUntil
		if plain {
			name = BuiltinSleep
		}
		due, _, msg := sleepDue(name, json.RawMessage(args), now)
		if msg != "" {
			return
		}
		if due.Before(now) || due.After(now.Add(MaxSleep)) {
			t.Fatalf("%s(%s) is due at %v, outside [now, now+MaxSleep]", name, args, due)
		}
	})
}
