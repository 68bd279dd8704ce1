package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gorap/gorap/display"
	"github.com/gorap/gorap/internal/bearer"

	"github.com/gorap/gorap/rap"
	"github.com/spf13/cobra"
)

// validateFetchTimeout bounds fetching a manifest over HTTP.
const validateFetchTimeout = 30 * time.Second

func newValidateCmd(a *app) *cobra.Command {
	var token string
	var allowUnsigned bool
	cmd := &cobra.Command{
		Use:   "validate [flags] URL|FILE|-|BUNDLE",
		Short: "check a toolset manifest from a tool server or a file against the RAP rules",
		Long: `Checks a toolset manifest (RAP TS-1..TS-8) and prints every violation, one
per line with its path, then the warnings. The argument is a tool server's
base URL (its manifest is fetched from BASE/.well-known/rap-toolset), a
manifest file, or - for standard input. A tools.json file or a bundle
directory is checked as a tools.json bundle (docs/toolsjson.md).

A valid manifest's digest follows: the SHA-256 of its RFC 8785 canonical
form, with the toolset_server config entry that pins it ("sha256", see
docs/config.md), so that a runtime refuses any other manifest from that
server.

Exit status: 0 when the manifest is valid (warnings allowed), 1 when it has
violations or cannot be read, 2 for a usage error.`,
		Example: `  rap validate http://127.0.0.1:3001
  rap validate toolset.json
  curl -s http://127.0.0.1:3001/.well-known/rap-toolset | rap validate -
  rap validate agents/weather`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runValidate(cmd.Context(), a, token, allowUnsigned, args)
		},
	}
	addToolTokenFlag(cmd.Flags(), &token, "bearer `TOKEN` for the tool server")
	cmd.Flags().BoolVar(&allowUnsigned, "allow-unsigned", false, "for a tools.json bundle: report a missing or wrong digest as a warning")
	return cmd
}

func runValidate(ctx context.Context, a *app, tokenFlag string, allowUnsignedFlag bool, pos []string) error {
	stdout, token, allowUnsigned := a.stdout, &tokenFlag, &allowUnsignedFlag
	var err error
	if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one URL, FILE or -, got %d arguments", errUsage, len(pos))
	}
	src := pos[0]
	if isToolsJSON(src) { // a tools.json bundle
		return validateToolsJSON(src, *allowUnsigned, stdout)
	}

	var ts *rap.Toolset
	var raw []byte
	base := ""
	if isURL(src) {
		base = strings.TrimSuffix(strings.TrimRight(src, "/"), rap.WellKnownPath)
		fctx, cancel := context.WithTimeout(ctx, validateFetchTimeout)
		defer cancel()
		ts, raw, err = rap.FetchToolset(fctx, bearer.Client(*token, validateFetchTimeout), base)
	} else {
		raw, err = readManifest(src)
		if err != nil {
			return err
		}
		ts, err = rap.ParseToolset(raw)
	}
	var ve *rap.ValidationError
	if errors.As(err, &ve) {
		for _, v := range ve.Violations {
			fmt.Fprintf(stdout, "error: %s\n", v)
		}
		fmt.Fprintf(stdout, "FAIL: %s has %s; fix each one: a runtime loads none of its tools until all are fixed (RAP TS-5)\n",
			src, plural(len(ve.Violations), "violation"))
		return exitError{1}
	}
	if err != nil {
		return err
	}
	ws := append(ts.Warnings(), displayScriptWarnings(ts)...)
	for _, w := range ws {
		fmt.Fprintf(stdout, "warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "OK: toolset %q with %s", ts.Name, plural(len(ts.Tools), "tool"))
	if len(ws) > 0 {
		fmt.Fprintf(stdout, " (%s)", plural(len(ws), "warning"))
	}
	fmt.Fprintln(stdout)
	return printPin(stdout, raw, base)
}

// printPin prints the manifest's digest (RAP TS-11) and the config entry
// that pins it (docs/config.md).
func printPin(stdout io.Writer, raw []byte, base string) error {
	digest, err := rap.ToolsetDigest(raw)
	if err != nil {
		fmt.Fprintf(stdout, "sha256: none: %v; a runtime cannot pin this manifest\n", err)
		return exitError{1}
	}
	fmt.Fprintf(stdout, "sha256: %s (of its RFC 8785 canonical form)\n", digest)
	if base == "" {
		fmt.Fprintf(stdout, "To accept only this manifest, add \"sha256\": %q to the toolset_server entry of the server that serves it.\n", digest)
		return nil
	}
	entry, _ := json.Marshal(struct {
		Type      string `json:"type"`
		ServerURL string `json:"server_url"`
		SHA256    string `json:"sha256"`
	}{"toolset_server", base, digest})
	fmt.Fprintf(stdout, "To accept only this manifest, pin it in the config entry (docs/config.md):\n  %s\n", entry)
	return nil
}

// envToolToken names the environment variable holding the bearer token
// sent to tool servers, shared with "rap serve".
const envToolToken = "RAP_TOOL_TOKEN"

func isURL(s string) bool {
	return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")
}

// readManifest reads a manifest file, or standard input for "-", up to
// rap.MaxManifestBytes.
func readManifest(path string) ([]byte, error) {
	var r io.Reader = os.Stdin
	name := "standard input"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("reading the manifest: %w; give a file path, a URL starting with http:// or https://, or - for standard input", err)
		}
		defer f.Close()
		r, name = f, path
	}
	data, err := io.ReadAll(io.LimitReader(r, rap.MaxManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the manifest from %s: %w", name, err)
	}
	if len(data) > rap.MaxManifestBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes; a manifest lists tools, not data", name, rap.MaxManifestBytes)
	}
	return data, nil
}

// plural formats a count with a noun: "1 tool", "3 tools".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// displayScriptWarnings reports each displayScript that does not compile.
// It is a warning, not a violation: a frontend then shows the default
// name(args) rendering (RAP DS-2), and the tool works all the same (DS-4).
func displayScriptWarnings(ts *rap.Toolset) []rap.Violation {
	var out []rap.Violation
	for i, t := range ts.Tools {
		if t.DisplayScript == "" {
			continue
		}
		if _, err := display.Compile(t.DisplayScript, nil); err != nil {
			out = append(out, rap.Violation{
				Path:    fmt.Sprintf("tools[%d].displayScript", i),
				Message: fmt.Sprintf("does not compile (%v); frontends will show %s(args) instead; try it with 'rap display-script'", err, t.Name),
			})
		}
	}
	return out
}
