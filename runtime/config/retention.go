package config

// This file owns the retention setting: how long closed sessions are
// kept (rap serve --retention, RAP_RETENTION, or "retention" in a
// rap.json file).

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// EnvRetention is how long a closed session is kept after its last
// activity before the runtime deletes it (Go duration, at least
// MinRetention; 0 keeps sessions for ever).
const EnvRetention = "RAP_RETENTION"

// MinRetention is the shortest accepted retention other than 0: shorter
// would delete a session the moment it is closed.
const MinRetention = time.Minute

// parseRetention reads a retention: "0" (keep for ever) or a Go duration
// of at least MinRetention.
func parseRetention(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < 0 || (d > 0 && d < MinRetention) {
		return 0, fmt.Errorf("want a Go duration of at least %v such as 720h (30 days), or 0 to keep sessions for ever", MinRetention)
	}
	return d, nil
}

// retentionValue is the --retention flag: nil until set.
type retentionValue struct{ dst **time.Duration }

func (v retentionValue) String() string {
	if v.dst == nil || *v.dst == nil {
		return ""
	}
	return (**v.dst).String()
}

func (v retentionValue) Set(s string) error {
	d, err := parseRetention(s)
	if err != nil {
		return err
	}
	*v.dst = &d
	return nil
}

// Type names the flag's kind in help and errors (pflag.Value).
func (v retentionValue) Type() string { return "duration" }

// EffectiveRetention returns the retention rap serve uses: the flag's or the
// environment's (Settings.Retention) when set, else the first config
// file's "retention" (f may be nil), else 0 (keep for ever).
func (s *Settings) EffectiveRetention(f *File) time.Duration {
	if s.Retention != nil {
		return *s.Retention
	}
	if f != nil && f.Retention != nil {
		return *f.Retention
	}
	return 0
}

// parseFileRetention reads the "retention" member of a config file.
func parseFileRetention(raw json.RawMessage, name string) (*time.Duration, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, &Error{File: name, Path: "retention", Problem: `must be a string such as "720h" (30 days)`}
	}
	d, err := parseRetention(v)
	if err != nil {
		return nil, &Error{File: name, Path: "retention", Problem: fmt.Sprintf("%q: %v", v, err)}
	}
	return &d, nil
}
