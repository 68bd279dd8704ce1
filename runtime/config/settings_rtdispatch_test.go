package config

import (
	"flag"
	"strings"
	"testing"
	"time"
)

// RAP_USER_ID / --user-id and
// RAP_CALL_STATUS_AFTER / --call-status-after (flags win); a bad value is
// an error naming the setting.
func TestUserIDAndCallStatusAfter(t *testing.T) {
	env := map[string]string{EnvUserID: "env-user", EnvCallStatusAfter: "5m"}
	s, err := FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if s.UserID != "env-user" || s.CallStatusAfter != 5*time.Minute {
		t.Fatalf("from env: user %q, call status after %v", s.UserID, s.CallStatusAfter)
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	s.RegisterFlags(fs)
	if err := fs.Parse([]string{"--user-id", "flag-user", "--call-status-after", "-1s"}); err != nil {
		t.Fatal(err)
	}
	if s.UserID != "flag-user" || s.CallStatusAfter != -time.Second {
		t.Fatalf("after flags: user %q, call status after %v (flags win; negative turns checks off)", s.UserID, s.CallStatusAfter)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := FromEnv(func(k string) string { return map[string]string{EnvCallStatusAfter: "soon"}[k] }); err == nil || !strings.Contains(err.Error(), EnvCallStatusAfter) {
		t.Fatalf("bad %s: err = %v", EnvCallStatusAfter, err)
	}
	s.UserID = "a\x00b"
	if err := s.Check(); err == nil || !strings.Contains(err.Error(), "--user-id") {
		t.Fatalf("control character in user id: err = %v", err)
	}
}
