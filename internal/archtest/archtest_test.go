package archtest

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/packages.md from the packages' doc comments and imports")

const module = "github.com/gorap/gorap"

// layers places every package of the module in a layer: a package imports
// only packages of lower layers, so the import graph has no arrow running
// back up. A new package gets a row here (the test says so).
var layers = []struct {
	name     string
	packages []string
}{
	{"leaf helpers", []string{"internal/bearer", "internal/benchplot", "internal/cpustat", "internal/spelling", "internal/tracing", "internal/jsonenc", "internal/jsonwalk", "internal/privfile", "internal/promtest", "internal/webguard", "examples/observability", "examples/toolsjson/weatherapi/api"}},
	{"protocol, model interface, display, web page", []string{"rap", "model", "display", "webui"}},
	{"built on the protocol", []string{"rap/durable", "raptest", "model/anthropic", "model/openai", "model/scripted", "model/wiretest",
		"runtime/api", "runtime/archive", "runtime/store", "runtime/config", "bridge/mcp", "bridge/otc", "bridge/toolsjson",
		"examples/exec", "examples/fswatch", "examples/gettime", "examples/notes", "examples/toolsjson/weatherapi"}},
	{"what the stores share, sessions in and out of a store, RAP tools over MCP", []string{"runtime/store/backend", "runtime/archive/archivestore", "bridge/mcpserve"}},
	{"stores and the client", []string{"runtime/store/sqlite", "runtime/store/postgres", "runtime/store/storetest", "runtime/client"}},
	{"built on the client and the stores", []string{"runtime/store/postgres/pgtest", "termchat", "conformance"}},
	{"the runtime's HTTP surface", []string{"runtime/httpapi"}},
	{"the runtime engine", []string{"runtime"}},
	{"built on the runtime", []string{"runtime/clientauth", "runtime/metrics", "runtime/bench", "runtime/crashtest"}},
	{"parts of the command", []string{"cmd/rap/internal/loadtest", "cmd/rap/internal/toolsetcmd"}},
	{"the command", []string{"cmd/rap"}},
}

// pkg is one package of the module as go list describes it.
type pkg struct {
	path    string // relative to the module
	doc     string // the first sentence of its doc comment
	imports []string
}

var (
	listOnce sync.Once
	listed   []pkg
	listErr  error
)

// listPackages lists the module's packages (once per test binary).
func listPackages(t *testing.T) []pkg {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the packages")
	}
	listOnce.Do(func() { listed, listErr = goList(gobin) })
	if listErr != nil {
		t.Fatal(listErr)
	}
	return listed
}

func goList(gobin string) ([]pkg, error) {
	cmd := exec.Command(gobin, "list", "-f", "{{.ImportPath}}\t{{.Doc}}\t{{join .Imports \" \"}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	var pkgs []pkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) != 3 || f[0] == module+"/internal/archtest" {
			continue
		}
		p := pkg{path: strings.TrimPrefix(f[0], module+"/"), doc: f[1]}
		for _, imp := range strings.Fields(f[2]) {
			if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
				p.imports = append(p.imports, rel)
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

func layerOf() map[string]int {
	m := map[string]int{}
	for i, l := range layers {
		for _, p := range l.packages {
			m[p] = i
		}
	}
	return m
}

// Every package imports only packages of lower layers: no import runs
// back up or sideways, so each layer can be read knowing only those below.
func TestImportsPointDown(t *testing.T) {
	layer := layerOf()
	for _, p := range listPackages(t) {
		lp, ok := layer[p.path]
		if !ok {
			t.Errorf("package %s has no layer: add it to the layers table of internal/archtest", p.path)
			continue
		}
		for _, imp := range p.imports {
			li, ok := layer[imp]
			if ok && li >= lp {
				t.Errorf("%s (layer %q) imports %s (layer %q): imports must point to a lower layer", p.path, layers[lp].name, imp, layers[li].name)
			}
		}
	}
}

// The leaf helpers under internal/ import nothing of the module, and no
// package outside cmd/ imports the command's parts.
func TestInternalHoldsOnlyLeaves(t *testing.T) {
	for _, p := range listPackages(t) {
		for _, imp := range p.imports {
			if strings.HasPrefix(p.path, "internal/") {
				t.Errorf("%s imports %s: internal/ holds leaf helpers that import nothing of gorap", p.path, imp)
			}
			if strings.HasPrefix(imp, "cmd/") && !strings.HasPrefix(p.path, "cmd/") {
				t.Errorf("%s imports %s: nothing outside cmd/ may import the command", p.path, imp)
			}
		}
	}
}

// The Go client of the client API, its types and the terminal client stand
// apart from the runtime and its storage: a program talking to a runtime
// never builds either, and a change to a stored record cannot reach it.
// The HTTP surface (runtime/httpapi) stands apart too: it serves the
// runtime through its exported methods only.
func TestClientDoesNotImportTheStore(t *testing.T) {
	deps := map[string][]string{}
	for _, p := range listPackages(t) {
		deps[p.path] = p.imports
	}
	var walk func(string, map[string]bool)
	walk = func(p string, seen map[string]bool) {
		for _, imp := range deps[p] {
			if !seen[imp] {
				seen[imp] = true
				walk(imp, seen)
			}
		}
	}
	for _, root := range []string{"runtime/client", "runtime/api", "termchat", "runtime/httpapi"} {
		seen := map[string]bool{}
		walk(root, seen)
		for _, banned := range []string{"runtime", "runtime/store"} {
			if seen[banned] {
				t.Errorf("%s depends on %s: the client API's types and client must not need the runtime or its store (the HTTP surface drives the runtime through httpapi.Engine)", root, banned)
			}
		}
	}
}

// docs/packages.md is the package map generated from the layers table,
// the packages' doc comments and their imports (go test
// ./internal/archtest -update rewrites it).
func TestPackageMapIsCurrent(t *testing.T) {
	got := packageMap(listPackages(t))
	path := filepath.Join("..", "..", "docs", "packages.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/archtest -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/packages.md is out of date: run go test ./internal/archtest -update and commit it")
	}
}

// packageMap renders the map: a diagram of the layers with each import
// that is not implied by others, then a table of what each package owns.
func packageMap(pkgs []pkg) []byte {
	layer := layerOf()
	byPath := map[string]pkg{}
	for _, p := range pkgs {
		byPath[p.path] = p
	}
	id := func(p string) string { return strings.NewReplacer("/", "_", ".", "_").Replace(p) }
	var b bytes.Buffer
	b.WriteString("# Package map\n\n")
	b.WriteString("<!-- Generated by `go test ./internal/archtest -update` from the layers table in internal/archtest,\n")
	b.WriteString("the packages' doc comments and their imports; do not edit by hand. -->\n\n")
	b.WriteString("Every package imports only packages of lower layers (`TestImportsPointDown` fails otherwise).\n")
	b.WriteString("An arrow is drawn only where no longer path of imports already leads; read an arrow as \"imports\".\n\n")
	b.WriteString("```mermaid\nflowchart TB\n")
	for i := len(layers) - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "  subgraph L%d[\"%s\"]\n", i, layers[i].name)
		for _, p := range layers[i].packages {
			if _, ok := byPath[p]; ok {
				fmt.Fprintf(&b, "    %s[\"%s\"]\n", id(p), p)
			}
		}
		b.WriteString("  end\n")
	}
	for _, p := range sortedPaths(byPath, layer) {
		for _, imp := range reducedImports(p, byPath) {
			fmt.Fprintf(&b, "  %s --> %s\n", id(p), id(imp))
		}
	}
	b.WriteString("```\n\n| package | layer | what it owns |\n|---|---|---|\n")
	for _, p := range sortedPaths(byPath, layer) {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", p, layers[layer[p]].name, strings.ReplaceAll(byPath[p].doc, "|", "\\|"))
	}
	return b.Bytes()
}

// sortedPaths lists the packages from the top layer down, by path within
// a layer.
func sortedPaths(byPath map[string]pkg, layer map[string]int) []string {
	var ps []string
	for p := range byPath {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b string) int {
		if layer[a] != layer[b] {
			return layer[b] - layer[a]
		}
		return strings.Compare(a, b)
	})
	return ps
}

// reducedImports are p's imports of module packages that p does not also
// reach through another of its imports.
func reducedImports(p string, byPath map[string]pkg) []string {
	reach := func(from string) map[string]bool {
		seen := map[string]bool{}
		stack := []string{from}
		for len(stack) > 0 {
			n := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, imp := range byPath[n].imports {
				if !seen[imp] {
					seen[imp] = true
					stack = append(stack, imp)
				}
			}
		}
		return seen
	}
	var out []string
	for _, imp := range byPath[p].imports {
		implied := false
		for _, other := range byPath[p].imports {
			if other != imp && reach(other)[imp] {
				implied = true
				break
			}
		}
		if !implied {
			out = append(out, imp)
		}
	}
	slices.Sort(out)
	return out
}
