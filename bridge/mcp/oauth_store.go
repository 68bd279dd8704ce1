package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// tokenStore keeps each user's OAuth tokens for one MCP server: a file
// per user_id (named by a hash of it), mode 0600 in a 0700 directory,
// holding the token and the client registration that refreshes it.
// Tokens are never logged; errors name the file, never its contents.
type tokenStore struct {
	dir string
	mu  sync.Mutex // one write at a time
}

// storedToken is one user's file.
type storedToken struct {
	UserID string        `json:"user_id"`
	Client storedClient  `json:"client"`
	Token  *oauth2.Token `json:"token"`
}

// storedClient is the oauth2.Config a refresh needs.
type storedClient struct {
	ClientID     string           `json:"client_id"`
	ClientSecret string           `json:"client_secret,omitempty"`
	AuthURL      string           `json:"authorization_endpoint"`
	TokenURL     string           `json:"token_endpoint"`
	AuthStyle    oauth2.AuthStyle `json:"auth_style,omitempty"`
	RedirectURL  string           `json:"redirect_url"`
	Scopes       []string         `json:"scopes,omitempty"`
}

func (s *storedToken) config() *oauth2.Config {
	c := s.Client
	return &oauth2.Config{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, RedirectURL: c.RedirectURL, Scopes: c.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: c.AuthURL, TokenURL: c.TokenURL, AuthStyle: c.AuthStyle},
	}
}

// storeDir is the server's directory under the token directory.
func storeDir(root, server string) string {
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, server)
	return filepath.Join(root, strings.TrimLeft(safe, "."))
}

func (s *tokenStore) path(user string) string {
	h := sha256.Sum256([]byte(user))
	return filepath.Join(s.dir, hex.EncodeToString(h[:16])+".json")
}

// load returns the user's stored token, or nil when there is none.
func (s *tokenStore) load(user string) (*storedToken, error) {
	raw, err := os.ReadFile(s.path(user))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the stored sign-in of user %q: %w", user, err)
	}
	var st storedToken
	if err := json.Unmarshal(raw, &st); err != nil || st.Token == nil || st.UserID != user {
		return nil, fmt.Errorf("the stored sign-in file %s is damaged; delete it and sign in again", s.path(user))
	}
	return &st, nil
}

// save writes the user's token and client atomically, mode 0600.
func (s *tokenStore) save(user string, c *oauth2.Config, t *oauth2.Token) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("creating the token directory: %w", err)
	}
	st := storedToken{UserID: user, Token: t, Client: storedClient{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, AuthURL: c.Endpoint.AuthURL, TokenURL: c.Endpoint.TokenURL,
		AuthStyle: c.Endpoint.AuthStyle, RedirectURL: c.RedirectURL, Scopes: c.Scopes,
	}}
	raw, err := json.Marshal(&st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".token-*")
	if err != nil {
		return fmt.Errorf("storing the sign-in of user %q: %w", user, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return fmt.Errorf("storing the sign-in of user %q: %w", user, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), s.path(user))
}

// latest returns the user whose token file was written last.
func (s *tokenStore) latest() (string, bool) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return "", false
	}
	var best string
	var bestT time.Time
	found := false
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			continue
		}
		var st storedToken
		if json.Unmarshal(raw, &st) != nil || st.Token == nil {
			continue
		}
		if !found || info.ModTime().After(bestT) {
			best, bestT, found = st.UserID, info.ModTime(), true
		}
	}
	return best, found
}

// source returns a token source that refreshes t with c and stores each
// new token.
func (s *tokenStore) source(ctx context.Context, user string, c *oauth2.Config, t *oauth2.Token) oauth2.TokenSource {
	return &savingSource{base: c.TokenSource(ctx, t), last: t.AccessToken, save: func(n *oauth2.Token) error { return s.save(user, c, n) }}
}

// savingSource stores every token its base source refreshes.
type savingSource struct {
	base oauth2.TokenSource
	save func(*oauth2.Token) error

	mu   sync.Mutex
	last string
}

func (s *savingSource) Token() (*oauth2.Token, error) {
	t, err := s.base.Token()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.AccessToken != s.last {
		if err := s.save(t); err != nil {
			return nil, err
		}
		s.last = t.AccessToken
	}
	return t, nil
}
