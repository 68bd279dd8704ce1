package main

// "rap serve" starts the toolset_command entries of its
// config with cmd/rap/internal/toolsetcmd and serves each under a stable
// in-process name (inProcessHosts).

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/gorap/gorap/cmd/rap/internal/toolsetcmd"
	"github.com/gorap/gorap/runtime/config"
)

// commandServers are the supervised toolset_command programs of a "rap
// serve".
type commandServers struct {
	sups []*toolsetcmd.Supervisor
	urls []string
}

// startCommandServers starts the toolset_command entries of the config in
// parallel and registers each that reports its port in hosts. An entry
// that cannot start is reported on stdout and in the log, and skipped; the
// others load. toolToken, when set, is sent to the programs as the
// runtime's bearer token (RAP TR-8).
func startCommandServers(ctx context.Context, s *config.Settings, dir string, hosts inProcessHosts, toolToken string, log *slog.Logger, stdout io.Writer) *commandServers {
	cs := &commandServers{}
	f, _, err := s.LoadToolSets(dir, getenvOS)
	if err != nil || f == nil {
		return cs // ToolServers already reported the config error
	}
	entries := f.Commands()
	sups := make([]*toolsetcmd.Supervisor, len(entries))
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		sups[i] = toolsetcmd.New(e, dir, log)
		wg.Go(func() { errs[i] = sups[i].Start(ctx) })
	}
	wg.Wait()
	for i, e := range entries {
		sup := sups[i]
		if errs[i] != nil {
			log.Error("toolset_command skipped", "name", sup.Name(), "entry", e.Source, "err", errs[i])
			fmt.Fprintf(stdout, "rap serve: toolset_command %q (%s) skipped: %v\n", sup.Name(), e.Source, errs[i])
			continue
		}
		base := hosts.add("cmd", sup.Name(), sup.Proxy(toolToken))
		sup.SetHost(strings.TrimPrefix(base, "http://"))
		cs.sups = append(cs.sups, sup)
		cs.urls = append(cs.urls, base)
		fmt.Fprintf(stdout, "rap serve: toolset_command %q started (pid %d, port %d), served as %s\n", sup.Name(), sup.PID(), sup.Port(), base)
		go sup.Supervise()
	}
	return cs
}

// shutdown stops every program: SIGTERM to its process group, then
// SIGKILL after a grace period.
func (cs *commandServers) shutdown() {
	var wg sync.WaitGroup
	for _, sup := range cs.sups {
		wg.Go(sup.Stop)
	}
	wg.Wait()
}
