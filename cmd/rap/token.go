package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gorap/gorap/runtime/clientauth"
	"github.com/gorap/gorap/runtime/config"
)

func newTokenCmd(a *app) *cobra.Command {
	var file, user, name string
	var admin bool
	cmd := &cobra.Command{
		Use:   "token add (--user USER | --admin) [--name NAME] --tokens-file FILE",
		Short: "create a client token for one user (or an admin) in a tokens file",
		Long: `Creates a random client token, prints it once, and adds its SHA-256
digest to a tokens file (TOML, created with mode 0600 if missing). A
running "rap serve --tokens-file FILE" accepts it within a second, without
a restart. A user's token sees and drives only that user's sessions; an
admin token sees every session. To revoke a token, delete its entry from
the file. The file keeps digests only: a lost token cannot be shown again,
make a new one.`,
		Example: `  rap token add --user alice --name alice-laptop --tokens-file ~/.config/rap/tokens.toml
  rap token add --admin --name ops --tokens-file /etc/rap/tokens.toml
  RAP_TOKENS_FILE=/etc/rap/tokens.toml rap token add --user bob`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 || args[0] != "add" {
				return usageErrorf("want: rap token add --user USER --tokens-file FILE")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return usageErrorf("say which tokens file to add to: pass --tokens-file FILE or set %s", config.EnvTokensFile)
			}
			if (user == "") == !admin {
				return usageErrorf("give either --user USER (the token sees that user's sessions) or --admin (it sees every session)")
			}
			token, err := addToken(file, clientauth.Entry{Name: name, User: user, Admin: admin})
			if err != nil {
				return err
			}
			who := "user " + strconv.Quote(user)
			if admin {
				who = "an admin"
			}
			fmt.Fprintf(a.stdout, "%s\n", token)
			fmt.Fprintf(a.stderr, "Added a token for %s to %s. It is shown only this once: give it to its owner, who sets %s to it (rap chat and the web UI ask for it).\n", who, file, config.EnvToken)
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "tokens-file", a.getenv(config.EnvTokensFile), "the tokens `FILE` of rap serve (env "+config.EnvTokensFile+")")
	cmd.Flags().StringVar(&user, "user", "", "the `USER` whose sessions the token sees and creates")
	cmd.Flags().BoolVar(&admin, "admin", false, "make a token that sees every user's sessions")
	cmd.Flags().StringVar(&name, "name", "", "a `NAME` for the token, for people and logs (not secret)")
	return cmd
}

// addToken creates a token, appends its entry to the tokens file (created
// 0600 when missing) and returns the token. The file is replaced whole,
// by a rename, so that a running rap serve never reads half of it; what
// it held before is kept as it was, comments included.
func addToken(path string, e clientauth.Entry) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	token := "rap_" + hex.EncodeToString(raw[:])
	e.SHA256 = clientauth.Digest(token)
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return "", fmt.Errorf("create the directory of the tokens file: %w", err)
		}
	}
	// One change at a time: a second "rap token add" waits here, then
	// reads the file with the first one's entry in it.
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return "", fmt.Errorf("lock the tokens file: %w", err)
	}
	defer unlock()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read the tokens file: %w", err)
	}
	var b strings.Builder
	b.Write(old)
	if len(old) > 0 && !strings.HasSuffix(string(old), "\n") {
		b.WriteString("\n")
	}
	b.WriteString("\n[[tokens]]\n")
	if e.Name != "" {
		fmt.Fprintf(&b, "name = %s\n", strconv.Quote(e.Name))
	}
	if e.Admin {
		b.WriteString("admin = true\n")
	} else {
		fmt.Fprintf(&b, "user = %s\n", strconv.Quote(e.User))
	}
	fmt.Fprintf(&b, "sha256 = %q\n", e.SHA256)
	// The new file must read back, with every entry valid, before it
	// replaces the old one.
	if _, err := clientauth.Parse([]byte(b.String())); err != nil {
		return "", fmt.Errorf("the tokens file %s would not be valid: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return "", fmt.Errorf("write the tokens file: %w", err)
	}
	tmp := f.Name()
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", fmt.Errorf("write the tokens file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", fmt.Errorf("write the tokens file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write the tokens file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("replace the tokens file: %w", err)
	}
	return token, nil
}
