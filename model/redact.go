package model

import "strings"

// Redacted replaces each secret that Redact masks.
const Redacted = "[redacted]"

// MinSecretLen is the shortest secret Redact masks: masking shorter
// strings would garble ordinary text, and secrets that short are not
// secrets.
const MinSecretLen = 8

// Redact returns text with every occurrence of each secret replaced by
// Redacted. Empty secrets and secrets shorter than MinSecretLen are
// ignored.
func Redact(text string, secrets ...string) string {
	for _, s := range secrets {
		if len(s) >= MinSecretLen && strings.Contains(text, s) {
			text = strings.ReplaceAll(text, s, Redacted)
		}
	}
	return text
}

// RedactError returns err with every secret masked in its message (see
// Redact), or err itself when its message holds none. The original error
// stays reachable through errors.Is and errors.As, so do not print what
// they return without masking it again.
func RedactError(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	masked := Redact(msg, secrets...)
	if masked == msg {
		return err
	}
	return &redactedError{msg: masked, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
