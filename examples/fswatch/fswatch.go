// Package fswatch is an example RAP tool server with one subscription
// tool, watch_directory, that reports changes under a directory as
// subscription events (RAP SU-2), using github.com/fsnotify/fsnotify.
//
// Each event's text is JSON {"op":"create"|"write"|"remove"|"rename","path":...}
// with an absolute path. Changes are gathered for a short window
// (BatchWindow) so that a burst of identical changes to one file becomes one
// event. When the watched directory itself is removed or renamed, a final
// event with that op ends the subscription. When more changes arrive than
// one window may carry, or the kernel's queue overflows, an event
// {"op":"overflow","dropped":N} says that some were lost.
//
// The subscription is confirmed only once the directory is being watched
// (rap.ConfirmInHandler), so a change made after the confirming result is
// never missed, and a directory that cannot be watched gets an ordinary
// "Error: " result.
//
// Whoever can invoke the tool can learn the names of files anywhere the
// server's user can read: serve it on a loopback address or with
// rap.ServerOptions.BearerToken.
package fswatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/gorap/gorap/rap"
)

// Name is the toolset's name in its manifest.
const Name = "fswatch"

// Limits.
const (
	// BatchWindow is how long changes are gathered before they are sent.
	BatchWindow = 100 * time.Millisecond
	// MaxBatch is how many distinct changes one window sends; the rest
	// are reported as an overflow event.
	MaxBatch = 500
	// MaxWatchedDirs bounds the directories one recursive watch may add.
	MaxWatchedDirs = 4096
)

// Watch is the input of watch_directory.
type Watch struct {
	// Path is the absolute, cleaned path of an existing directory.
	Path string
	// Recursive also watches every directory below Path, including ones
	// created later.
	Recursive bool
}

// UnmarshalJSON decodes watch_directory's arguments and checks that path
// names an existing directory, so that a wrong path gets an error result
// before the subscription starts (RAP IN-5, RE-4).
func (w *Watch) UnmarshalJSON(data []byte) error {
	var in struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	if in.Path == "" {
		return errors.New(`"path" is empty; give the path of a directory to watch`)
	}
	abs, err := filepath.Abs(in.Path)
	if err != nil {
		return fmt.Errorf(`"path" %q cannot be made absolute: %v`, in.Path, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf(`"path" %q does not exist; give the path of an existing directory`, in.Path)
	case err != nil:
		return fmt.Errorf(`"path" %q cannot be read (%v); give a directory the tool server may read`, in.Path, err)
	case !fi.IsDir():
		return fmt.Errorf(`"path" %q is a file, not a directory; give the directory that holds it, such as %q`, in.Path, filepath.Dir(abs))
	}
	w.Path, w.Recursive = abs, in.Recursive
	return nil
}

// Event is the JSON text of one event.
type Event struct {
	// Op is "create", "write", "remove", "rename" or "overflow".
	Op string `json:"op"`
	// Path is the absolute path that changed; empty for "overflow".
	Path string `json:"path,omitempty"`
	// Dropped counts the changes lost, for "overflow".
	Dropped int `json:"dropped,omitempty"`
}

var watchSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 4096, "description": "The directory to watch."},
    "recursive": {"type": "boolean", "description": "Also watch every directory below path. Default false."}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

// New returns the fswatch tool server. opts may be nil. Call Start on it
// before serving.
func New(opts *rap.ServerOptions) *rap.Server {
	o := rap.ServerOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Description == "" {
		o.Description = "Watches directories and reports created, written, removed and renamed files."
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	s := rap.NewServer(Name, &o)
	rap.AddSubscription(s, &rap.Tool{
		Name: "watch_directory",
		Description: "Subscribes to changes under a directory. Each event's text is JSON " +
			`{"op":"create"|"write"|"remove"|"rename","path":absolute path}; ` +
			`{"op":"overflow","dropped":N} means changes were lost. Removing the directory ends the subscription.`,
		InputSchema: watchSchema,
		Annotations: &rap.Annotations{ReadOnly: true, LongRunning: true},
		DisplayScript: `let s = "Watching " + args.path;
if args.recursive == true { s += " and below"; }
s`,
	}, func(ctx context.Context, sub *rap.Subscription, w Watch) error {
		return watch(ctx, sub, w, log)
	}, rap.ConfirmInHandler())
	return s
}

// opName maps an fsnotify operation to the event's op, or "" to skip it.
func opName(op fsnotify.Op) string {
	switch {
	case op.Has(fsnotify.Create):
		return "create"
	case op.Has(fsnotify.Remove):
		return "remove"
	case op.Has(fsnotify.Rename):
		return "rename"
	case op.Has(fsnotify.Write):
		return "write"
	}
	return "" // chmod only
}

func watch(ctx context.Context, sub *rap.Subscription, in Watch, log *slog.Logger) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("Error: the tool server cannot watch files right now (%v); try again later", err)
	}
	defer w.Close()
	dirs := 0
	add := func(dir string) error {
		if dirs >= MaxWatchedDirs {
			return fmt.Errorf("Error: %s has more than %d directories; watch a smaller tree or set recursive to false", in.Path, MaxWatchedDirs)
		}
		if err := w.Add(dir); err != nil {
			return fmt.Errorf("Error: cannot watch %s: %v", dir, err)
		}
		dirs++
		return nil
	}
	addTree := func(root string) error {
		return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // vanished or unreadable: skip it
			}
			if d.IsDir() {
				return add(p)
			}
			return nil
		})
	}
	if in.Recursive {
		err = addTree(in.Path)
	} else {
		err = add(in.Path)
	}
	if err != nil {
		return err
	}
	// The watches are in place: confirm now, so that every change made
	// after the confirmation is reported, and a directory that cannot be
	// watched was an error result rather than a subscription (RAP SU-1).
	if err := sub.Confirm(ctx); err != nil {
		return err
	}

	var (
		pending []Event
		seen    = map[Event]bool{}
		dropped int
		timer   = time.NewTimer(time.Hour)
		timing  bool
	)
	timer.Stop()
	flush := func() error {
		for _, ev := range pending {
			if err := sub.Emit(ctx, mustJSON(ev)); err != nil {
				return err
			}
		}
		if dropped > 0 {
			if err := sub.Emit(ctx, mustJSON(Event{Op: "overflow", Dropped: dropped})); err != nil {
				return err
			}
		}
		pending, dropped = pending[:0], 0
		clear(seen)
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timer.C:
			timing = false
			if err := flush(); err != nil {
				return err
			}
		case fe, ok := <-w.Events:
			if !ok {
				return errors.New("Error: the file watcher stopped; subscribe again")
			}
			op := opName(fe.Op)
			if op == "" {
				continue
			}
			if fe.Name == in.Path && (op == "remove" || op == "rename") {
				// The directory itself is gone: report what is pending,
				// then end with it (RAP SU-4).
				if err := flush(); err != nil {
					return err
				}
				return sub.Final(ctx, mustJSON(Event{Op: op, Path: fe.Name}), false)
			}
			if in.Recursive && op == "create" {
				if fi, err := os.Lstat(fe.Name); err == nil && fi.IsDir() {
					if err := addTree(fe.Name); err != nil {
						log.Warn("fswatch: not watching a new directory", "error", err)
					}
				}
			}
			ev := Event{Op: op, Path: fe.Name}
			switch {
			case seen[ev]:
			case len(pending) >= MaxBatch:
				dropped++
			default:
				seen[ev] = true
				pending = append(pending, ev)
			}
			if !timing {
				timing = true
				timer.Reset(BatchWindow)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("Error: the file watcher stopped; subscribe again")
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				dropped++
				if !timing {
					timing = true
					timer.Reset(BatchWindow)
				}
				continue
			}
			log.Warn("fswatch: watcher error", "error", err)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only plain structs are marshalled here
	}
	return string(b)
}
