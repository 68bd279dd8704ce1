package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// readBuildInfo returns the binary's build information, or nil when it has
// none.
func readBuildInfo() *debug.BuildInfo {
	bi, _ := debug.ReadBuildInfo()
	return bi
}

// versionString is what "rap --version" prints: the module's path and
// version, and the VCS commit the binary was built from, when known.
func versionString(bi *debug.BuildInfo) string {
	if bi == nil {
		return "rap (unknown version: built without module information)"
	}
	path, version := bi.Main.Path, bi.Main.Version
	if path == "" {
		path = "github.com/gorap/gorap"
	}
	if version == "" {
		version = "(devel)"
	}
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "rap %s (%s)", version, path)
	if rev != "" {
		fmt.Fprintf(&b, "\ncommit %s", rev)
		if when != "" {
			fmt.Fprintf(&b, " (%s)", when)
		}
		if modified {
			b.WriteString(", with uncommitted changes")
		}
	} else {
		b.WriteString("\ncommit unknown (not built from a git checkout)")
	}
	if bi.GoVersion != "" {
		fmt.Fprintf(&b, "\nbuilt with %s", bi.GoVersion)
	}
	return b.String()
}

// newVersionCmd is "rap version": the same as "rap --version", for people
// who try the verb first.
func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print rap's version and the commit it was built from (as rap --version)",
		Long: `version prints rap's module version and the commit it was built from, as
rap --version does. Quote it in a bug report.`,
		Example: `  rap version
  rap --version`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(a.stdout, cmd.Root().Version)
			return err
		},
	}
}
