// Package notes is an example RAP tool server whose state must move with
// a session: it keeps notes per session in files, and its toolset says
// needsMigration: true, so a runtime that moves a session to another
// runtime first asks it to move the notes (RAP MI-1, MI-2).
//
// Its tools are add_note {text}, which answers "noted (N notes in this
// session)", and list_notes {}, which answers the session's notes, one per
// line, or "no notes yet". The session of an invocation is its root thread:
// the first of thread_ancestors, or group_id for a root thread.
//
// Each session's notes are one file (mode 0600) in Options.Dir, named by
// the SHA-256 of the session id, so that no id can name a file outside the
// directory; a write goes to a synced temporary file renamed over the old
// one. One process uses a directory at a time.
//
// POST /migrate {session_id, destination_url} sends the session's notes to
// the notes server at destination_url, POST {destination_url}/notes/import
// (ImportPath), signed with the PeerToken both servers share (see
// import.go), and answers 200 only once that server answered 200, that is
// once it has written the notes to its disk. Only then are the source's
// notes removed. Any failure leaves them in place and answers an error
// status with the reason, so the runtime may abort or retry: an import of
// notes the destination already holds, identical, succeeds again; an
// import for a session that holds other notes there is refused with 409
// and never merged.
//
// Serve it with:
//
//	s, err := notes.New(&notes.Options{Dir: dir, PeerToken: secret})
//	if err != nil { ... }
//	if err := s.Start(ctx); err != nil { ... }
//	http.ListenAndServe("127.0.0.1:3001", s)
//
// or run "rap example notes --data-dir DIR --peer-token SECRET".
package notes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gorap/gorap/rap"
)

// Name is the toolset's name in its manifest.
const Name = "notes"

// Options configures a notes Server. Dir is required.
type Options struct {
	// Dir is the directory the notes are kept in; it is created (mode
	// 0700) when missing.
	Dir string
	// PeerToken is the secret shared by the notes servers that migrate
	// sessions to each other: an import must be signed with it. Empty
	// means this server neither sends nor accepts imports, so /migrate
	// fails and ImportPath answers 403.
	PeerToken string
	// Server configures the RAP tool server; nil means the defaults. Its
	// Migrator is replaced by the notes server's own.
	Server *rap.ServerOptions
	// HTTPClient sends imports to the destination; nil means a client
	// that follows no redirect. Each import is bounded by ImportTimeout
	// whatever the client.
	HTTPClient *http.Client
}

// Server is the notes tool server: the RAP endpoints of a rap.Server plus
// POST ImportPath, where a peer delivers a migrating session's notes.
type Server struct {
	rap      *rap.Server
	store    *store
	key      []byte // PeerToken, nil when unset
	instance string // random per Server: an import from itself is refused
	client   *http.Client
	log      *slog.Logger
	imports  chan struct{} // a slot per import being served
}

// New returns the notes tool server. Call Start on it before serving.
func New(opts *Options) (*Server, error) {
	if opts == nil {
		return nil, errors.New("notes: New needs Options with Dir, the directory the notes are kept in")
	}
	st, err := openStore(opts.Dir)
	if err != nil {
		return nil, err
	}
	o := rap.ServerOptions{}
	if opts.Server != nil {
		o = *opts.Server
	}
	if o.Description == "" {
		o.Description = "Keeps notes for the conversation: add a note, list the notes. The notes move with the session."
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	id := make([]byte, 16)
	rand.Read(id) //nolint:errcheck // crypto/rand.Read never fails
	s := &Server{
		store:    st,
		instance: hex.EncodeToString(id),
		client:   importClient(opts.HTTPClient),
		log:      o.Logger,
		imports:  make(chan struct{}, MaxConcurrentImports),
	}
	if opts.PeerToken != "" {
		s.key = []byte(opts.PeerToken)
	}
	o.Migrator = s.migrate
	s.rap = rap.NewServer(Name, &o)
	rap.AddTool(s.rap, &rap.Tool{
		Name:          "add_note",
		Description:   "Adds a note to this conversation's notes, which later turns can list with list_notes. Line breaks become spaces.",
		InputSchema:   addSchema,
		DisplayScript: `"Noting: " + args.text`,
	}, s.add)
	rap.AddTool(s.rap, &rap.Tool{
		Name:          "list_notes",
		Description:   `Lists this conversation's notes, one per line, oldest first, or says "no notes yet".`,
		InputSchema:   rap.EmptyObjectSchema,
		Annotations:   &rap.Annotations{ReadOnly: true},
		DisplayScript: `"Reading the notes"`,
	}, s.list)
	return s, nil
}

// Add is the input of add_note.
type Add struct {
	// Text is the note.
	Text string `json:"text"`
}

var addSchema = json.RawMessage(fmt.Sprintf(`{
  "type": "object",
  "properties": {
    "text": {"type": "string", "minLength": 1, "maxLength": %d, "description": "The note, one line."}
  },
  "required": ["text"],
  "additionalProperties": false
}`, MaxNoteBytes))

// Start starts the RAP server (see rap.Server.Start).
func (s *Server) Start(ctx context.Context) error { return s.rap.Start(ctx) }

// Shutdown stops the RAP server (see rap.Server.Shutdown).
func (s *Server) Shutdown(ctx context.Context) error { return s.rap.Shutdown(ctx) }

// RAP returns the underlying rap.Server, for its dead letters and options.
func (s *Server) RAP() *rap.Server { return s.rap }

// ServeHTTP answers POST ImportPath itself and every other request as a
// rap.Server does.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == ImportPath {
		s.serveImport(w, r)
		return
	}
	s.rap.ServeHTTP(w, r)
}

// sessionOf is the session of an invocation: its root thread.
func sessionOf(inv *rap.Invocation) string {
	if len(inv.ThreadAncestors) > 0 {
		return inv.ThreadAncestors[0]
	}
	return inv.GroupID
}

// callSession returns the invocation's session id, or an error result that
// says why it cannot hold notes.
func callSession(c *rap.Call) (string, error) {
	id := sessionOf(c.Invocation)
	if err := checkSessionID(id); err != nil {
		return "", fmt.Errorf("Error: this conversation cannot keep notes: its %s. The runtime sent an unusable thread id", err)
	}
	return id, nil
}

func (s *Server) add(ctx context.Context, c *rap.Call, in Add) (*rap.Reply, error) {
	id, err := callSession(c)
	if err != nil {
		return nil, err
	}
	text := oneLine(in.Text)
	if err := checkNote(text); err != nil {
		return nil, fmt.Errorf("Error: %s; give the note as one line of text of at most %d bytes", err, MaxNoteBytes)
	}
	unlock := s.store.locks.lock(id)
	defer unlock()
	notes, err := s.store.read(id)
	if err != nil {
		s.log.Error("notes: reading a session", "error", err)
		return nil, errors.New("Error: the notes cannot be read right now; try again later")
	}
	if len(notes) >= MaxNotes {
		return nil, fmt.Errorf("Error: this conversation already has %d notes, the most it may keep; list them and carry on without adding more", len(notes))
	}
	notes = append(notes, text)
	data := encode(id, notes)
	if len(data) > MaxSessionBytes {
		return nil, fmt.Errorf("Error: this conversation's notes would exceed %d bytes, the most it may keep; add a shorter note", MaxSessionBytes)
	}
	if err := s.store.write(id, data); err != nil {
		s.log.Error("notes: writing a session", "error", err)
		return nil, errors.New("Error: the note could not be saved; try again later")
	}
	return rap.Text(fmt.Sprintf("noted (%s in this session)", plural(len(notes)))), nil
}

func (s *Server) list(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
	id, err := callSession(c)
	if err != nil {
		return nil, err
	}
	unlock := s.store.locks.lock(id)
	notes, err := s.store.read(id)
	unlock()
	if err != nil {
		s.log.Error("notes: reading a session", "error", err)
		return nil, errors.New("Error: the notes cannot be read right now; try again later")
	}
	if len(notes) == 0 {
		return rap.Text("no notes yet"), nil
	}
	return rap.Text(strings.Join(notes, "\n")), nil
}

// plural is "1 note" or "N notes".
func plural(n int) string {
	if n == 1 {
		return "1 note"
	}
	return fmt.Sprintf("%d notes", n)
}
