package toolsjson

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// SecretResolver resolves the secret ids a tool lists in secrets[] to
// their values. Implementations must never put a value
// in an error.
type SecretResolver interface {
	Resolve(ctx context.Context, id string) (string, error)
}

// ErrSecretNotFound is returned (wrapped) by a resolver that does not know
// an id.
var ErrSecretNotFound = errors.New("secret not found")

// EnvName is the environment variable that carries secret id: letters
// upper-cased, every character other than a letter or digit replaced by
// "_" (runloop/mail/smtp_api_key becomes RUNLOOP_MAIL_SMTP_API_KEY). Exec
// tools receive each secret under this name.
func EnvName(id string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(id) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// EnvResolver reads secret id from the environment variable Prefix +
// EnvName(id).
type EnvResolver struct {
	// Prefix is put before the variable name, such as "RAP_SECRET_".
	Prefix string
	// Getenv reads a variable; nil means os.Getenv.
	Getenv func(string) string
}

// Resolve implements SecretResolver.
func (r EnvResolver) Resolve(_ context.Context, id string) (string, error) {
	get := r.Getenv
	if get == nil {
		get = os.Getenv
	}
	name := r.Prefix + EnvName(id)
	if v := get(name); v != "" {
		return v, nil
	}
	return "", fmt.Errorf("%w: environment variable %s is not set", ErrSecretNotFound, name)
}

// FileResolver reads secrets from a file of "ID = VALUE" lines ("#" starts
// a comment line). The file must not be readable or writable by group or
// others (chmod 600): otherwise it is refused.
type FileResolver struct {
	Path string
}

// Resolve implements SecretResolver. The file is read on every call, so a
// rotated secret is picked up without a restart.
func (r FileResolver) Resolve(_ context.Context, id string) (string, error) {
	fi, err := os.Stat(r.Path)
	if err != nil {
		return "", fmt.Errorf("secrets file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("secrets file %s is readable or writable by other users (mode %v); run 'chmod 600 %s'", r.Path, fi.Mode().Perm(), r.Path)
	}
	data, err := os.ReadFile(r.Path)
	if err != nil {
		return "", fmt.Errorf("secrets file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == id {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%w: %q is not in %s", ErrSecretNotFound, id, r.Path)
}

// maxSecretBytes bounds what a secret command may print.
const maxSecretBytes = 64 << 10

// CommandResolver runs Command with Args and the secret id as the last
// argument (no shell) and uses its standard output, without the trailing
// newline, as the value: for password managers and vaults. A command
// printing more than 64 KiB is stopped and fails.
type CommandResolver struct {
	Command string
	Args    []string
	// Timeout bounds one run; zero means 10 seconds.
	Timeout time.Duration
}

// Resolve implements SecretResolver.
func (r CommandResolver) Resolve(ctx context.Context, id string) (string, error) {
	d := r.Timeout
	if d <= 0 {
		d = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.Command, append(append([]string(nil), r.Args...), id)...)
	out := &cappedWriter{max: maxSecretBytes, onOver: cancel}
	cmd.Stdout = out
	// Stopping it kills its children too, and Wait does not wait for
	// one that still holds the pipe.
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	err := cmd.Run()
	if out.over {
		return "", fmt.Errorf("secret command %s printed more than %d bytes for %q and was stopped; a secret is one line", r.Command, maxSecretBytes, id)
	}
	if err != nil {
		// The output may hold part of a value: it is not quoted.
		return "", fmt.Errorf("secret command %s failed for %q: %v", r.Command, id, err)
	}
	v := strings.TrimRight(string(out.buf), "\r\n")
	if v == "" {
		return "", fmt.Errorf("%w: secret command %s printed nothing for %q", ErrSecretNotFound, r.Command, id)
	}
	return v, nil
}

// ChainResolver asks each resolver in turn and returns the first value
// found. It fails when every resolver fails.
type ChainResolver []SecretResolver

// Resolve implements SecretResolver.
func (c ChainResolver) Resolve(ctx context.Context, id string) (string, error) {
	if len(c) == 0 {
		return "", fmt.Errorf("%w: no secret resolver is configured", ErrSecretNotFound)
	}
	var errs []error
	for _, r := range c {
		v, err := r.Resolve(ctx, id)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// redactor replaces secret values in text.
type redactor []string

func (r redactor) apply(s string) string {
	for _, v := range r {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[REDACTED]")
		}
	}
	return s
}
