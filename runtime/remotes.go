package runtime

// This file owns what the runtime tells clients of the runtimes it may
// move sessions to (Config.Remotes).

import (
	"maps"
	"slices"
)

// RemoteNames returns the names of Config.Remotes, sorted: the runtimes a
// session may be moved to by name (MoveSession). It never returns their
// URLs or tokens, and returns an empty, non-nil slice when none are
// configured.
func (r *Runtime) RemoteNames() []string {
	names := slices.Sorted(maps.Keys(r.cfg.Remotes))
	if names == nil {
		names = []string{}
	}
	return names
}
