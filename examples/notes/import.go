package notes

// Moving a session's notes: the Migrator that sends them (POST /migrate)
// and the import route that receives them (POST ImportPath).
//
// An import is signed, not sent with the peer token itself: destination_url
// is named by whoever calls /migrate, and a bearer token would go to any
// URL named there. The signature is HMAC-SHA256, keyed by the peer token,
// over "notes-import", the time, the sending server's instance id and the
// body, so a captured import is useless after MaxClockSkew and the token
// never leaves the server.

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
)

// ImportPath is the route, relative to the base URL, where a notes server
// receives a migrating session's notes.
const ImportPath = "/notes/import"

// Headers of an import.
const (
	// SignatureHeader carries "t=UNIX_SECONDS,sig=HEX": the time of
	// sending and the HMAC-SHA256 of the import under the peer token.
	SignatureHeader = "Notes-Signature"
	// SourceHeader carries the instance id of the sending server, so that
	// a server refuses notes from itself.
	SourceHeader = "Notes-Source"
)

// Limits of imports.
const (
	// ImportTimeout bounds one import: connecting, sending the notes,
	// waiting for the destination to write them and reading its answer.
	ImportTimeout = 30 * time.Second
	// MaxImportBytes bounds the body of an import the server accepts.
	MaxImportBytes = 4 << 20
	// MaxConcurrentImports bounds the imports being received at once;
	// more get 503 with Retry-After.
	MaxConcurrentImports = 4
	// MaxClockSkew is how far an import's time may be from the
	// receiver's clock.
	MaxClockSkew = 5 * time.Minute
	// maxAnswerBytes bounds the part of a destination's answer quoted in
	// an error.
	maxAnswerBytes = 1 << 10
)

// importBody is the JSON body of an import.
type importBody struct {
	SessionID string   `json:"session_id"`
	Notes     []string `json:"notes"`
}

// importClient is the client that sends imports: c, or a default one,
// never following a redirect (a redirect would send the notes somewhere
// destination_url did not name).
func importClient(c *http.Client) *http.Client {
	cc := http.Client{Timeout: ImportTimeout}
	if c != nil {
		cc = *c
	}
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cc
}

// sign is the signature of an import sent at t by source.
func (s *Server) sign(t int64, source string, body []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "notes-import\n%d\n%s\n", t, source)
	m.Write(body)
	return m.Sum(nil)
}

// noPeerToken explains why a server without a peer token moves nothing.
const noPeerToken = "start both notes servers with the same peer token (rap example notes --peer-token, or RAP_NOTES_PEER_TOKEN; notes.Options.PeerToken)"

// migrate is the server's rap.ServerOptions.Migrator: it sends the
// session's notes to the destination and removes them here once the
// destination has answered 200.
func (s *Server) migrate(ctx context.Context, req *rap.MigrateRequest) error {
	id := req.SessionID
	if err := checkSessionID(id); err != nil {
		return fmt.Errorf("%v; send the session's root thread id", err)
	}
	if s.key == nil {
		return errors.New("this notes server has no peer token, so it cannot send notes to another; " + noPeerToken)
	}
	unlock := s.store.locks.lock(id)
	defer unlock()
	notes, err := s.store.read(id)
	if err != nil {
		return err
	}
	if len(notes) == 0 {
		return nil // nothing to move: the destination holds all there is
	}
	if err := s.send(ctx, req.DestinationURL, id, notes); err != nil {
		return err
	}
	if err := s.store.remove(id); err != nil {
		return fmt.Errorf("the destination holds the notes, but removing them here failed (%w); call /migrate again: the destination accepts the same notes twice", err)
	}
	s.log.Info("notes: session moved", "session_id", id, "notes", len(notes), "destination", rap.RedactURL(req.DestinationURL))
	return nil
}

// send POSTs the notes to the destination's ImportPath and returns nil
// only when it answered 200.
func (s *Server) send(ctx context.Context, destination, id string, notes []string) error {
	body, err := json.Marshal(importBody{SessionID: id, Notes: notes})
	if err != nil {
		return err
	}
	target := strings.TrimRight(destination, "/") + ImportPath
	shown := rap.RedactURL(target)
	ctx, cancel := context.WithTimeout(ctx, ImportTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("destination_url %s cannot be used: %w", rap.RedactURL(destination), err)
	}
	t := time.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SourceHeader, s.instance)
	req.Header.Set(SignatureHeader, fmt.Sprintf("t=%d,sig=%s", t, hex.EncodeToString(s.sign(t, s.instance, body))))
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a secret
		}
		return fmt.Errorf("sending the notes to %s: %v; check that the destination's notes server is running and reachable from here", shown, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	msg := strings.TrimSpace(string(answer))
	hint := ""
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		hint = "; destination_url must be the base URL of a notes server"
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		hint = "; destination_url must be the notes server's base URL itself, not one that redirects"
	}
	return fmt.Errorf("the notes server at %s answered %d %s: %s%s", shown, resp.StatusCode, http.StatusText(resp.StatusCode), msg, hint)
}

// serveImport answers POST ImportPath: it writes a migrating session's
// notes, durably, before answering 200.
func (s *Server) serveImport(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed; use POST", http.StatusMethodNotAllowed)
		return
	}
	if s.key == nil {
		http.Error(w, "this notes server accepts no imports: it has no peer token; "+noPeerToken, http.StatusForbidden)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		http.Error(w, "an import's Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	t, sig, err := parseSignature(r.Header.Get(SignatureHeader))
	if err != nil {
		http.Error(w, "unsigned import: "+err.Error(), http.StatusForbidden)
		return
	}
	if skew := time.Since(time.Unix(t, 0)); skew > MaxClockSkew || skew < -MaxClockSkew {
		http.Error(w, fmt.Sprintf("the import was signed %s away from this server's time, more than %s; check both machines' clocks", skew.Round(time.Second), MaxClockSkew), http.StatusForbidden)
		return
	}
	select {
	case s.imports <- struct{}{}:
		defer func() { <-s.imports }()
	default:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many imports at once; retry in a moment", http.StatusServiceUnavailable)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxImportBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("the import is larger than %d bytes", MaxImportBytes), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the import: "+err.Error(), http.StatusBadRequest)
		return
	}
	source := r.Header.Get(SourceHeader)
	if !hmac.Equal(sig, s.sign(t, source, body)) {
		http.Error(w, "the import's signature does not match: the two notes servers have different peer tokens; "+noPeerToken, http.StatusForbidden)
		return
	}
	if source == s.instance {
		http.Error(w, "the import comes from this very notes server: destination_url names the server the session is leaving; name the destination's notes server", http.StatusConflict)
		return
	}
	in, err := decodeImport(body)
	if err != nil {
		http.Error(w, "invalid import: "+err.Error(), http.StatusBadRequest)
		return
	}
	status, msg := s.importNotes(in)
	if status != http.StatusOK {
		http.Error(w, msg, status)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// importNotes writes an import's notes unless the session holds other
// notes here, and returns the status to answer.
func (s *Server) importNotes(in *importBody) (int, string) {
	unlock := s.store.locks.lock(in.SessionID)
	defer unlock()
	have, err := s.store.read(in.SessionID)
	if err != nil {
		s.log.Error("notes: reading a session for an import", "error", err)
		return http.StatusInternalServerError, "the destination cannot read its notes right now; try again later"
	}
	if len(have) > 0 {
		if slices.Equal(have, in.Notes) {
			return http.StatusOK, "" // a retried import: already held
		}
		return http.StatusConflict, fmt.Sprintf("the session already has %s here, different from the ones imported; imports never merge: remove the destination's copy, or migrate it elsewhere, then retry", plural(len(have)))
	}
	if err := s.store.write(in.SessionID, encode(in.SessionID, in.Notes)); err != nil {
		s.log.Error("notes: writing an imported session", "error", err)
		return http.StatusInternalServerError, "the destination could not save the notes; try again later"
	}
	s.log.Info("notes: session imported", "session_id", in.SessionID, "notes", len(in.Notes))
	return http.StatusOK, ""
}

// parseSignature reads "t=UNIX_SECONDS,sig=HEX".
func parseSignature(h string) (int64, []byte, error) {
	if h == "" {
		return 0, nil, fmt.Errorf("no %s header", SignatureHeader)
	}
	ts, sig, ok := strings.Cut(h, ",")
	ts, okT := strings.CutPrefix(strings.TrimSpace(ts), "t=")
	sig, okS := strings.CutPrefix(strings.TrimSpace(sig), "sig=")
	if !ok || !okT || !okS {
		return 0, nil, fmt.Errorf("%s is not t=UNIX_SECONDS,sig=HEX", SignatureHeader)
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("%s has a time that is not a whole number of seconds", SignatureHeader)
	}
	b, err := hex.DecodeString(sig)
	if err != nil || len(b) != sha256.Size {
		return 0, nil, fmt.Errorf("%s has a sig that is not %d bytes of hex", SignatureHeader, sha256.Size)
	}
	return t, b, nil
}

// decodeImport parses and checks an import body: one JSON object with
// exactly session_id and notes, each name once, within the limits of a
// session.
func decodeImport(body []byte) (*importBody, error) {
	if k := rap.DuplicateKey(body); k != "" {
		return nil, fmt.Errorf("member %q appears twice", k)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var in importBody
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("want {\"session_id\": string, \"notes\": [string, ...]}: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON object")
	}
	if err := checkSessionID(in.SessionID); err != nil {
		return nil, fmt.Errorf("session_id: %w", err)
	}
	if len(in.Notes) == 0 {
		return nil, errors.New("notes is missing or empty; a session without notes is not imported")
	}
	if err := checkNotes(in.Notes); err != nil {
		return nil, err
	}
	if n := len(encode(in.SessionID, in.Notes)); n > MaxSessionBytes {
		return nil, fmt.Errorf("the notes take %d bytes, over the %d bytes a session may hold", n, MaxSessionBytes)
	}
	return &in, nil
}
