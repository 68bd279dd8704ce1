package toolsjson

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// artifactsTools finds the [artifacts.tools] table and its blake3 line.
var (
	artifactsToolsHeader = regexp.MustCompile(`(?m)^\s*\[\s*artifacts\.tools\s*\]\s*(#.*)?$`)
	anyHeader            = regexp.MustCompile(`(?m)^\s*\[`)
	blake3Line           = regexp.MustCompile(`(?m)^\s*blake3\s*=.*$`)
)

// PinDigest pins the BLAKE3 digest of DIR/tools.json in DIR/manifest.toml
// (what "rap toolsjson digest" does after tools.json was edited), creating
// the manifest or its [artifacts.tools] table when missing and leaving the
// rest of the file as it is.
func PinDigest(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, ToolsFile))
	if err != nil {
		return fmt.Errorf("%w; run 'rap toolsjson init %s' to create one", err, dir)
	}
	sum := Digest(data)
	mp := filepath.Join(dir, ManifestFile)
	old, err := os.ReadFile(mp)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	text := string(old)
	line := fmt.Sprintf("blake3 = %q", sum)
	loc := artifactsToolsHeader.FindStringIndex(text)
	switch {
	case loc == nil:
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if text != "" {
			text += "\n"
		}
		text += "[artifacts.tools]\npath = \"tools.json\"\n" + line + "\nversion = 1\n"
	default:
		start := loc[1]
		end := len(text)
		if next := anyHeader.FindStringIndex(text[start:]); next != nil {
			end = start + next[0]
		}
		table := text[start:end]
		if blake3Line.MatchString(table) {
			table = blake3Line.ReplaceAllLiteralString(table, line)
		} else {
			table = "\n" + line + strings.TrimPrefix(table, "\n")
			if !strings.HasPrefix(table, "\n") {
				table = "\n" + table
			}
		}
		text = text[:start] + table + text[end:]
	}
	return os.WriteFile(mp, []byte(text), 0o644)
}
