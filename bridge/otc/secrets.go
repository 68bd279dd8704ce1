package otc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SecretResolver finds the value of a secret a tool's requirements list.
// Values are never logged.
type SecretResolver interface {
	Secret(ctx context.Context, key string) (string, error)
}

// EnvFileSecrets resolves a secret from the environment variable of the same
// name (as Arcade's local workers do), else from the file Dir/KEY, which must
// not be readable by other users.
type EnvFileSecrets struct {
	// Dir holds one file per secret; empty means environment only.
	Dir string
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
}

// Secret implements SecretResolver.
func (r EnvFileSecrets) Secret(_ context.Context, key string) (string, error) {
	if key == "" || strings.ContainsAny(key, `/\`) || key == "." || key == ".." {
		return "", fmt.Errorf("secret name %q cannot be looked up", key)
	}
	get := r.Getenv
	if get == nil {
		get = os.Getenv
	}
	if v := get(key); v != "" {
		return v, nil
	}
	if r.Dir != "" {
		p := filepath.Join(r.Dir, key)
		if v, err := ReadSecretFile(p); err == nil {
			return v, nil
		} else if !os.IsNotExist(err) {
			return "", err
		}
	}
	where := "the environment variable " + key
	if r.Dir != "" {
		where += " or the file " + filepath.Join(r.Dir, key)
	}
	return "", fmt.Errorf("the tool needs the secret %s; set %s", key, where)
}

// ReadSecretFile reads a secret from a file that other users cannot read
// (mode 0600 or stricter on Unix), trimming one trailing newline.
func ReadSecretFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if fi.Mode().Perm()&0o004 != 0 {
		return "", fmt.Errorf("secret file %s is readable by every user; run chmod 600 %s", path, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// LoadWorkerSecret reads the worker secret from file (when set) or from the
// environment variable env (DefaultSecretEnv when empty). It fails when
// neither holds a value.
func LoadWorkerSecret(env, file string) ([]byte, error) {
	if file != "" {
		v, err := ReadSecretFile(file)
		if err != nil {
			return nil, fmt.Errorf("reading the worker secret: %w", err)
		}
		if v == "" {
			return nil, fmt.Errorf("the worker secret file %s is empty", file)
		}
		return []byte(v), nil
	}
	if env == "" {
		env = DefaultSecretEnv
	}
	v := os.Getenv(env)
	if v == "" {
		return nil, fmt.Errorf("no worker secret: set the environment variable %s (or give a secret file)", env)
	}
	return []byte(v), nil
}
