package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gorap/gorap/conformance"
	"github.com/gorap/gorap/runtime/client"
	"github.com/gorap/gorap/runtime/config"
	"github.com/spf13/cobra"
)

// conformanceRuntimeOptions are the flags of "rap conformance runtime".
type conformanceRuntimeOptions struct {
	listen       string
	runtime      string
	token        string
	manual       bool
	printScript  bool
	printConfig  bool
	wait         time.Duration
	migrateTo    string
	migrateToken string
}

// newConformanceRuntimeCmd builds "rap conformance runtime".
func newConformanceRuntimeCmd(a *app) *cobra.Command {
	var ro reportOptions
	opts := conformanceRuntimeOptions{listen: "127.0.0.1:0", wait: 2 * time.Minute}
	cmd := &cobra.Command{
		Use:   "runtime [flags]",
		Short: "check a RAP runtime against the protocol: serve a conformance toolset it uses, and check what it does",
		Long: `Serves a conformance toolset (discovery, endpoint, /cancel_tool_call,
/close_thread, /migrate) that the runtime under test is configured to use,
makes the runtime's agent call its tools, and checks what the runtime does:
the invocations' fields, its callback endpoint and the authentication of
callback URLs, every callback type and early subscription events,
cancellation and closure notices, per-tool timeouts and /migrate.

The toolset must be listening before the runtime loads its toolsets, so
start this command first, with a fixed --listen address, then the runtime.

A runtime with gorap's /v1 client API (--runtime URL): the kit creates the
threads and sends the messages itself, and reads the conversations to see
what reached the model. Run gorap's runtime with the scripted model and the
script of --print-script, so that each message makes the intended call:

  rap conformance runtime --print-script > conformance-script.json
  rap conformance runtime --listen 127.0.0.1:7070 --print-config > conformance-rap.json
  rap conformance runtime --listen 127.0.0.1:7070 --runtime http://127.0.0.1:8080 &
  rap serve --listen 127.0.0.1:8080 --config conformance-rap.json \
    --model scripted:conformance-script.json --tool-timeout 10s

Any other runtime (--manual): configure it with the toolset's URL, and the
kit prints, one at a time on standard error (even with --quiet; the report
stays alone on standard output), the messages to send to its agent ("In a NEW conversation, send the agent: [step:fields] Call the tool
conformance_echo ..."), then waits for the runtime's calls, each check
bounded by --check-timeout. Checks that must read the conversation are
skipped in this mode.`,
		Example: `  rap conformance runtime --listen 127.0.0.1:7070 --runtime http://127.0.0.1:8080 --token "$RAP_TOKEN"
  rap conformance runtime --listen 127.0.0.1:7070 --manual --check-timeout 5m
  rap conformance runtime --print-script > conformance-script.json
  rap conformance runtime --listen 127.0.0.1:7070 --runtime http://127.0.0.1:8080 --json --junit runtime.xml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConformanceRuntime(cmd.Context(), a, opts, ro)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.listen, "listen", opts.listen, "serve the conformance toolset on `ADDR` (port 0 picks a free one)")
	fs.StringVar(&opts.runtime, "runtime", "", "base `URL` of the runtime's gorap /v1 client API: the kit converses with it itself")
	fs.Var((*secretValue)(&opts.token), "token", "bearer `TOKEN` of the runtime's client API")
	bindEnv(fs, "token", config.EnvToken)
	fs.BoolVar(&opts.manual, "manual", false, "for a runtime without gorap's /v1 API: print the messages to send to its agent and wait")
	fs.BoolVar(&opts.printScript, "print-script", false, "print the scripted model's script that makes gorap's runtime call the kit's tools, and exit")
	fs.BoolVar(&opts.printConfig, "print-config", false, "print the runtime configuration (rap.json) that loads the toolset at --listen, and exit")
	fs.DurationVar(&opts.wait, "wait", opts.wait, "wait up to `DURATION` for the runtime's API to answer before the checks start")
	fs.StringVar(&opts.migrateTo, "migrate-to", "", "base `URL` of a second runtime, configured with the same toolset, to move a session to (the migration check)")
	fs.Var((*secretValue)(&opts.migrateToken), "migrate-token", "client `TOKEN` of the --migrate-to runtime")
	ro.register(fs)
	return cmd
}

func runConformanceRuntime(ctx context.Context, a *app, opts conformanceRuntimeOptions, ro reportOptions) error {
	if opts.printScript {
		_, err := a.stdout.Write(conformance.RuntimeScript())
		return err
	}
	if opts.printConfig {
		_, port, err := net.SplitHostPort(opts.listen)
		if err != nil || port == "0" || port == "" {
			return usageErrorf("--print-config needs --listen with a fixed port, such as --listen 127.0.0.1:7070")
		}
		_, err = a.stdout.Write(conformance.RuntimeConfigFile("http://" + opts.listen))
		return err
	}
	switch {
	case opts.runtime == "" && !opts.manual:
		return usageErrorf("say how to drive the runtime: --runtime URL for a runtime with gorap's /v1 API, or --manual for any other")
	case opts.runtime != "" && opts.manual:
		return usageErrorf("--runtime and --manual exclude each other: choose one")
	}
	kit, err := conformance.ListenRuntimeKit(opts.listen)
	if err != nil {
		return err
	}
	defer kit.Close()
	progress := func(format string, args ...any) {
		if !ro.quiet {
			fmt.Fprintf(a.stderr, format+"\n", args...)
		}
	}
	progress("The conformance toolset listens at %s: configure the runtime under test with this base URL", kit.URL())
	progress("  (for gorap: rap.json {\"tool_sets\": [{\"type\": \"toolset_server\", \"server_url\": %q}]})", kit.URL())
	cfg := conformance.RuntimeConfig{Kit: kit, API: opts.runtime, Token: opts.token, MigrateTo: opts.migrateTo, MigrateToken: opts.migrateToken}
	subject := opts.runtime
	if opts.manual {
		cfg.Instructions = a.stderr
		subject = "a runtime driven by hand"
		progress("Manual mode: send the agent each message printed below, in the conversation it says; each check waits up to %s", ro.checkTimeout)
	} else if err := waitForRuntime(ctx, opts.runtime, opts.token, opts.wait, progress); err != nil {
		return err
	}
	s := conformance.RuntimeSuite(cfg)
	rep := s.Run(ctx, ro.runOptions(a, subject, len(s.Checks())))
	return ro.writeReport(a, rep)
}

// waitForRuntime waits until the runtime's API answers, so that the kit
// can be started before the runtime (which must find the toolset).
func waitForRuntime(ctx context.Context, base, token string, wait time.Duration, progress func(string, ...any)) error {
	c, err := client.New(base, client.WithToken(token))
	if err != nil {
		return usageErrorf("--runtime %q: %v", base, err)
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	said := false
	for {
		_, err := c.ListThreads(ctx, client.ListOptions{Limit: 1})
		switch {
		case err == nil:
			return nil
		case errors.Is(err, client.ErrUnauthorized):
			return fmt.Errorf("the runtime at %s refused the client token: pass its token with --token or RAP_TOKEN", base)
		}
		if !said {
			progress("Waiting up to %s for the runtime's API at %s (%v)", wait, base, err)
			said = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the runtime's API at %s did not answer within %s: start the runtime (after this command, so that it finds the toolset), or give a longer --wait: %v", base, wait, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
