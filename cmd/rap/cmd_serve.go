package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gorap/gorap/runtime/config"
)

func newServeCmd(a *app) *cobra.Command {
	s := config.Defaults(a.getenv)
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "run the agent runtime: client API, tool dispatch and callbacks",
		Long: `Runs the agent runtime: the client API under /v1 (threads, messages, the
event stream), tool dispatch to the tool servers of the config files, and
the callback endpoint tools answer on. Every setting has a flag and an
environment variable; a flag wins over its variable. See docs/config.md.

The client API needs a bearer token (--token, better RAP_TOKEN, or per-user
tokens from --tokens-file) when it listens beyond loopback; --tool-token
(RAP_TOOL_TOKEN) is what the runtime sends to its tool servers. The API and
the web UI answer only to loopback names, IP addresses and the names given
with --public-url and --allowed-hosts, and refuse requests made by other
sites' pages.`,
		Example: `  rap serve --model scripted:script.json
  ANTHROPIC_API_KEY=... rap serve --model anthropic:claude-sonnet-4-5
  RAP_TOKEN=$(openssl rand -hex 32) rap serve --listen 0.0.0.0:8080 --public-url http://agent.example:8080
  rap serve --config tools.json --data-dir ./data --log-format json
  rap token add --user alice --tokens-file tokens.toml     # then:
  rap serve --tokens-file tokens.toml --listen 0.0.0.0:8443 --tls-cert cert.pem --tls-key key.pem
  rap serve --public-url https://agent.example.com --allowed-hosts agent.example.com   # behind a proxy
  OPENAI_BASE_URL=http://localhost:11434/v1 rap serve --model openai:llama3.1 --context-window 131072`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s.LogLevel = a.logLevel
			if err := useProjectDataDir(&s, cmd.Flags().Changed("data-dir")); err != nil {
				return err
			}
			if err := s.Check(); err != nil {
				return usageErrorf("%v", err)
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			return serveLogged(cmd.Context(), s, a.log, a.stdout, nil)
		},
	}
	addSettingsFlags(cmd.Flags(), &s)
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "internal: write a CPU profile of the whole run to `FILE` (written when serve stops)")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	return cmd
}

// settingsEnv is the environment variable of each flag of the runtime's
// settings (config.Settings.RegisterFlags).
var settingsEnv = map[string]string{
	"config":               config.EnvConfig,
	"listen":               config.EnvListen,
	"metrics-listen":       config.EnvMetricsListen,
	"public-url":           config.EnvPublicURL,
	"data-dir":             config.EnvDataDir,
	"model":                config.EnvModel,
	"token":                config.EnvToken,
	"tool-token":           config.EnvToolToken,
	"system":               config.EnvSystem,
	"tool-timeout":         config.EnvToolTimeout,
	"model-idle-timeout":   config.EnvModelIdleTimeout,
	"model-timeout":        config.EnvModelTimeout,
	"model-attempts":       config.EnvModelAttempts,
	"model-retry-backoff":  config.EnvModelRetryBackoff,
	"choice-response-host": config.EnvChoiceResponseHosts,
	"user-id":              config.EnvUserID,
	"call-status-after":    config.EnvCallStatusAfter,
	"max-subscriptions":    config.EnvMaxSubscriptions,
	"store":                config.EnvStore,
	"lease-ttl":            config.EnvLeaseTTL,
	"sweep-every":          config.EnvSweepEvery,
	"allowed-hosts":        config.EnvAllowedHosts,
	"allowed-origins":      config.EnvAllowedOrigins,
	"tokens-file":          config.EnvTokensFile,
	"tls-cert":             config.EnvTLSCert,
	"tls-key":              config.EnvTLSKey,
	"retention":            config.EnvRetention,
	"context-window":       config.EnvContextWindow,
	"max-result-share":     config.EnvMaxResultShare,
}

// settingsEnvSeparator is the item separator of the list settings'
// environment variables.
var settingsEnvSeparator = map[string]string{
	"config":               string(os.PathListSeparator),
	"choice-response-host": ",",
	"allowed-hosts":        ",",
	"allowed-origins":      ",",
}

// addSettingsFlags defines the runtime's setting flags on fs, bound to s,
// each with its environment variable (applied by applyEnv, through the
// flag's own parser, so that a bad value reads the same from either).
// --log-level is the persistent flag of every verb.
func addSettingsFlags(fs *pflag.FlagSet, s *config.Settings) {
	gfs := flag.NewFlagSet("serve", flag.ContinueOnError)
	s.RegisterFlags(gfs)
	gfs.VisitAll(func(f *flag.Flag) {
		if f.Name == "log-level" {
			return
		}
		fs.AddGoFlag(f)
		if env, ok := settingsEnv[f.Name]; ok {
			bindEnv(fs, f.Name, env)
		}
		if sep, ok := settingsEnvSeparator[f.Name]; ok {
			_ = fs.SetAnnotation(f.Name, splitAnnotation, []string{sep})
		}
	})
}

// startCPUProfile starts a CPU profile written to path; stop ends it.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
