package main

// "rap export" and "rap import": sessions to and from a session archive
// (runtime/archive), through a running runtime's client API or straight
// from a store no process holds.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gorap/gorap/runtime/archive"
	"github.com/gorap/gorap/runtime/archive/archivestore"
	"github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/config"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres"
	"github.com/gorap/gorap/runtime/store/sqlite"
)

// archiveOpts are the flags export and import share: where the sessions
// are.
type archiveOpts struct {
	server, token, store string
}

func (o *archiveOpts) bind(cmd *cobra.Command, storeUsage string) {
	fs := cmd.Flags()
	fs.StringVar(&o.server, "server", "", "a running runtime's `URL` (default http://"+config.DefaultListen+" unless --store is given)")
	bindEnv(fs, "server", envServer)
	fs.Var((*secretValue)(&o.token), "token", "bearer `TOKEN` of the runtime's client API (env "+config.EnvToken+")")
	bindEnv(fs, "token", config.EnvToken)
	fs.StringVar(&o.store, "store", "", storeUsage)
}

func (o *archiveOpts) check() error {
	if o.server != "" && o.store != "" {
		return usageErrorf("give --server (a running runtime) or --store (a store no runtime holds), not both")
	}
	if o.store == "" && o.server == "" {
		o.server = "http://" + config.DefaultListen
	}
	return nil
}

// openOfflineStore opens the store of --store: "sqlite:PATH" (a data
// directory, or its rap.db) or a postgres:// URL. A SQLite store that a
// running runtime holds is refused with what to do instead.
func openOfflineStore(ctx context.Context, spec string, mustExist bool) (store.Store, string, error) {
	if strings.HasPrefix(spec, "postgres://") || strings.HasPrefix(spec, "postgresql://") {
		pg, err := postgres.Open(ctx, spec)
		if err != nil {
			return nil, "", fmt.Errorf("open the store %s: %w", config.StoreLabel(spec), err)
		}
		return pg, "PostgreSQL " + pg.Where(), nil
	}
	path, ok := strings.CutPrefix(spec, "sqlite:")
	if !ok {
		return nil, "", usageErrorf("--store %q: give sqlite:PATH (a data directory or its %s) or a postgres:// URL", spec, storeFile)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, storeFile)
	} else if err != nil {
		return nil, "", fmt.Errorf("--store %s: %w", spec, err)
	}
	if _, err := os.Stat(path); err != nil && mustExist {
		return nil, "", fmt.Errorf("--store %s: there is no store there (%s is missing); give the data directory rap serve used", spec, path)
	}
	st, err := sqlite.Open(path)
	var locked *sqlite.LockedError
	if errors.As(err, &locked) {
		holder := "another process"
		if locked.PID > 0 {
			holder = fmt.Sprintf("another process (PID %d)", locked.PID)
		}
		return nil, "", fmt.Errorf("the store %s is in use by %s, probably rap serve: go through that runtime with --server URL instead, or stop it first", path, holder)
	}
	if err != nil {
		return nil, "", fmt.Errorf("open the store %s: %w", path, err)
	}
	return st, "SQLite " + path, nil
}

func newExportCmd(a *app) *cobra.Command {
	var o archiveOpts
	var out string
	var all bool
	cmd := &cobra.Command{
		Use:   "export (SESSION... | --all) [-o FILE]",
		Short: "write sessions to a session archive file",
		Long: `Writes sessions (a root thread with its child threads, histories, pending
calls, subscriptions, timers, open user choices and views) to a session
archive: one versioned JSON Lines file that 'rap import' reads into any
gorap runtime or store. Use it to keep a copy before 'rap delete', to back
up, or to move every session of a SQLite runtime into PostgreSQL.

By default it asks the runtime at --server (RAP_SERVER) through its client
API; with --store it reads a store that no runtime holds now. The archive
holds the conversations and the keys of URLs tools gave the sessions:
the file is created readable by you only (0600); keep it private.`,
		Example: `  rap export 01JD7... -o session.jsonl
  rap export --all -o backup.jsonl
  rap export --all --store sqlite:./.rap | rap import --store postgres://rap@db/rap -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			if all == (len(args) > 0) {
				return usageErrorf("name the sessions to export (their root thread ids), or give --all")
			}
			return runExport(cmd.Context(), a, o, args, out)
		},
	}
	o.bind(cmd, "read a store no runtime holds: sqlite:`STORE` (a data directory) or a postgres:// URL")
	cmd.Flags().StringVarP(&out, "output", "o", "-", "write the archive to `FILE` (- for standard output)")
	cmd.Flags().BoolVar(&all, "all", false, "export every session")
	return cmd
}

func runExport(ctx context.Context, a *app, o archiveOpts, roots []string, out string) (err error) {
	var w io.Writer = a.stdout
	if out != "-" {
		f, err := archive.Create(out)
		if err != nil {
			return fmt.Errorf("create %s: %w", out, err)
		}
		defer func() {
			if cerr := f.Close(); err == nil && cerr != nil {
				err = cerr
			}
			if err != nil {
				os.Remove(out) // a partial archive is worse than none
			}
		}()
		w = f
	}
	counter := &countingWriter{w: w}
	if o.store != "" {
		st, label, err := openOfflineStore(ctx, o.store, true)
		if err != nil {
			return err
		}
		defer st.Close()
		aw, err := archive.NewWriter(counter, "rap export")
		if err != nil {
			return err
		}
		if err := archivestore.Export(ctx, st, aw, roots, nil); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w; list the sessions with rap chat --tree", err)
			}
			return err
		}
		if err := aw.Close(); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "exported %s from %s (%s)\n", plural(aw.Sessions(), "session"), label, byteSize(counter.n))
		return nil
	}
	c, err := client.New(o.server, client.WithToken(o.token))
	if err != nil {
		return err
	}
	if err := c.Export(ctx, counter, roots...); err != nil {
		return err
	}
	fmt.Fprintf(a.stderr, "exported from %s (%s)\n", o.server, byteSize(counter.n))
	return nil
}

func newImportCmd(a *app) *cobra.Command {
	var o archiveOpts
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "read sessions from a session archive file into a runtime or store",
		Long: `Reads a session archive that 'rap export' wrote (- for standard input) and
adds its sessions, keeping their thread ids. Each session is imported whole
or not at all; the sessions imported before one that fails stay imported,
and the command says which. A session whose threads already exist is
refused, and so is a file this gorap does not understand (a later format
version, a file cut short).

By default it sends the archive to the runtime at --server (RAP_SERVER),
which resumes the sessions at once (pending sleeps, queued messages);
with --store it writes into a store no runtime holds now (a SQLite data
directory that a rap serve holds is refused: use --server then).`,
		Example: `  rap import session.jsonl
  rap import backup.jsonl --server https://agent.example
  rap export --all --store sqlite:./.rap | rap import --store postgres://rap@db/rap -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.check(); err != nil {
				return err
			}
			if len(args) != 1 {
				return usageErrorf("name the archive file to import (- for standard input)")
			}
			return runImport(cmd.Context(), a, o, args[0])
		},
	}
	o.bind(cmd, "write into a store no runtime holds: sqlite:`STORE` (a data directory) or a postgres:// URL")
	return cmd
}

func runImport(ctx context.Context, a *app, o archiveOpts, file string) error {
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return err
		}
		defer f.Close()
		r = f
	}
	var imported []string
	var err error
	where := o.server
	if o.store != "" {
		st, label, oerr := openOfflineStore(ctx, o.store, false)
		if oerr != nil {
			return oerr
		}
		defer st.Close()
		where = label
		ar, rerr := archive.NewReader(r)
		if rerr != nil {
			return rerr
		}
		imported, err = archivestore.Import(ctx, st, ar, nil)
	} else {
		c, cerr := client.New(o.server, client.WithToken(o.token))
		if cerr != nil {
			return cerr
		}
		imported, err = c.Import(ctx, r)
	}
	fmt.Fprintf(a.stderr, "imported %s into %s\n", plural(len(imported), "session"), where)
	if err != nil {
		return fmt.Errorf("%w (the sessions imported before it stay)", err)
	}
	return nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// byteSize renders n bytes for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
