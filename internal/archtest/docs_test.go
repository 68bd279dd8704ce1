package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdHeading is a Markdown heading line.
var mdHeading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*$`)

// slug is the anchor GitHub gives a heading: lower case, letters, digits,
// spaces, hyphens and underscores kept, spaces made hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
			continue
		}
		if m := mdHeading.FindStringSubmatch(line); m != nil && !inFence {
			s := slug(m[1])
			for n := 1; out[s]; n++ { // repeated headings get -1, -2…
				s = slug(m[1]) + "-" + string(rune('0'+n))
			}
			out[s] = true
		}
	}
	return out
}

// Every relative link in the README, CONTRIBUTING, CHANGELOG, docs/ and
// examples/ leads to a file that exists, and a link to a heading of a
// Markdown file to a heading it has.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	var files []string
	for _, f := range []string{"README.md", "CONTRIBUTING.md", "CHANGELOG.md"} {
		files = append(files, filepath.Join(root, f))
	}
	for _, dir := range []string{"docs", "examples"} {
		_ = filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") && !strings.Contains(p, "node_modules") {
				files = append(files, p)
			}
			return nil
		})
	}
	cache := map[string]map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links to %s, which does not exist", rel, target)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if cache[dest] == nil {
				cache[dest] = anchors(t, dest)
			}
			if !cache[dest][anchor] {
				t.Errorf("%s links to %s, but that file has no heading #%s", rel, target, anchor)
			}
		}
	}
}
