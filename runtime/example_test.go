package runtime_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// A runtime over a SQLite file, driven in-process: create a thread, send a
// message, wait until the thread is idle, read its history.
func Example() {
	dir, _ := os.MkdirTemp("", "gorap-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "rap.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	secret, err := runtime.LoadOrCreateSecret(dir)
	if err != nil {
		log.Fatal(err)
	}
	rt, err := runtime.New(&runtime.Config{
		Store:     st,
		Model:     scripted.New([]scripted.Turn{{Text: "Hello! You said: {{last_user}}", Repeat: true}}),
		PublicURL: "http://127.0.0.1:8080", // where tools would call back (mount rt.Handler() there)
		Secret:    secret,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rt.Shutdown(ctx)

	id, _ := rt.CreateThread(ctx)
	if err := rt.PostMessage(ctx, id, "hi there"); err != nil {
		log.Fatal(err)
	}
	if err := rt.Idle(ctx, id); err != nil {
		log.Fatal(err)
	}
	history, _ := rt.History(ctx, id)
	for _, m := range history {
		fmt.Printf("%s: %s\n", m.Role, m.Text)
	}
	// Output:
	// user: hi there
	// assistant: Hello! You said: hi there
}
