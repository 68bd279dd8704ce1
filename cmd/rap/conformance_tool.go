package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/gorap/gorap/conformance"
	"github.com/spf13/cobra"
)

// toolFlags are the flags of "rap conformance tool" beyond the report's.
type toolFlags struct {
	calls          []string
	callsFile      string
	noDefaultCalls bool
	auth           string
	endpoint       string
	callbackListen string
	callbackURL    string
	ackWithin      time.Duration
	resultWait     time.Duration
	retryWait      time.Duration
	quietWait      time.Duration
	stallFor       time.Duration
}

// newConformanceToolCmd builds "rap conformance tool URL".
func newConformanceToolCmd(a *app) *cobra.Command {
	var ro reportOptions
	var f toolFlags
	cmd := &cobra.Command{
		Use:   "tool URL [flags]",
		Short: "check a RAP tool server, in any language, against the protocol",
		Long: `Checks a RAP tool server at its base URL: discovery and the toolset
document, acknowledgements, the result callback's shape and URL, results for
good, unknown-operation and malformed invocations, user_id, thread_ancestors
and call_id, subscriptions, /cancel_tool_call and /close_thread (unknown,
repeated and hostile ids), /migrate when declared, retries of callbacks
answered 5xx and none after 4xx, slow and oversized callback endpoints, and
/tool_call_status where offered.

The kit hosts the callback endpoint itself (127.0.0.1 on a free port unless
--callback-listen), each invocation with its own unguessable callback URL.
A server in a container reaches it through --callback-url.

A tool server's tools have side effects, so the kit calls only the tools you
allow, each perhaps a dozen times: --call NAME=JSON (repeatable) or --calls
FILE (a JSON object, tool name to arguments). Tools annotated readOnly that
need no arguments are allowed by default (--no-default-calls turns that off).
Without any allowed call, the checks that need one are skipped.

A run takes about 20 s against a conforming server; the retry check waits up
to --retry-wait for the server's backoff. docs/conformance.md explains every
check.`,
		Example: `  # a server whose read-only tools need no arguments
  rap conformance tool http://127.0.0.1:3001

  # allow two calls, and write a JUnit file for CI
  rap conformance tool http://127.0.0.1:3001 \
      --call 'get_time_in_zone={"timezone":"Europe/Paris"}' --call 'echo={}' \
      --junit conformance.xml

  # a server in a container, with a token, that reaches the kit through the host
  rap conformance tool http://127.0.0.1:8080 --auth "$TOOL_TOKEN" \
      --callback-listen 0.0.0.0:9900 --callback-url http://host.docker.internal:9900

  # only the /close_thread checks, with the HTTP exchanges behind failures
  rap conformance tool http://127.0.0.1:3001 --only tool.close --verbose`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("give the tool server's base URL, such as http://127.0.0.1:3001")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := f.config(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			// A check may wait for a result, then for its retry: its
			// time limit leaves room for both.
			if need := f.resultWait + f.retryWait + f.quietWait + 10*time.Second; ro.checkTimeout < need {
				if cmd.Flags().Changed("check-timeout") {
					fmt.Fprintf(a.stderr, "rap conformance tool: --check-timeout raised to %s, the longest a check may wait (--result-wait + --retry-wait + --quiet-wait + 10s)\n", need)
				}
				ro.checkTimeout = need
			}
			s := conformance.ToolSuite(cfg)
			return ro.writeReport(a, s.Run(cmd.Context(), ro.runOptions(a, args[0], len(s.Checks()))))
		},
	}
	ro.register(cmd.Flags())
	fs := cmd.Flags()
	fs.StringArrayVar(&f.calls, "call", nil, "`NAME=JSON`: allow the kit to call tool NAME with the arguments JSON, an object (repeatable)")
	fs.StringVar(&f.callsFile, "calls", "", "allow the calls in `FILE`: a JSON object of tool name to arguments")
	fs.BoolVar(&f.noDefaultCalls, "no-default-calls", false, "do not call read-only tools that need no arguments unless allowed by --call or --calls")
	fs.StringVar(&f.auth, "auth", "", "send `TOKEN` as a bearer token on every request but discovery, and check that requests without it are refused (also $RAP_CONFORMANCE_TOKEN)")
	fs.StringVar(&f.endpoint, "endpoint", "", "send invocations to `URL` instead of the toolset's endpoint")
	fs.StringVar(&f.callbackListen, "callback-listen", "127.0.0.1:0", "`ADDRESS` the kit's callback endpoint listens on")
	fs.StringVar(&f.callbackURL, "callback-url", "", "base `URL` the server reaches the callback endpoint at, when not the listening address")
	fs.DurationVar(&f.ackWithin, "ack-within", 2*time.Second, "a SHOULD check fails when an acknowledgement takes longer than `DURATION`")
	fs.DurationVar(&f.resultWait, "result-wait", 15*time.Second, "wait up to `DURATION` for each result or event")
	fs.DurationVar(&f.retryWait, "retry-wait", 20*time.Second, "wait up to `DURATION` for a callback answered 503 to be retried")
	fs.DurationVar(&f.quietWait, "quiet-wait", 2*time.Second, "watch `DURATION` for messages that must not come (a retry after 400, events after cancelling)")
	fs.DurationVar(&f.stallFor, "stall-for", 5*time.Second, "stall the callback endpoint's answer for `DURATION` in tool.callback.slow-endpoint")
	return cmd
}

// config turns the flags into the suite's configuration.
func (f *toolFlags) config(base string) (conformance.ToolConfig, error) {
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return conformance.ToolConfig{}, fmt.Errorf("the URL %q must start with http:// or https://", base)
	}
	cfg := conformance.ToolConfig{
		BaseURL: base, Endpoint: f.endpoint, Token: f.auth,
		CallbackListen: f.callbackListen, CallbackURL: f.callbackURL,
		NoDefaultCalls: f.noDefaultCalls, Calls: map[string]json.RawMessage{},
		AckWithin: f.ackWithin, ResultWait: f.resultWait, RetryWait: f.retryWait,
		QuietWait: f.quietWait, StallFor: f.stallFor,
	}
	if cfg.Token == "" {
		cfg.Token = os.Getenv("RAP_CONFORMANCE_TOKEN")
	}
	if f.callsFile != "" {
		b, err := os.ReadFile(f.callsFile)
		if err != nil {
			return cfg, fmt.Errorf("reading --calls: %w", err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return cfg, fmt.Errorf("--calls %s must hold a JSON object of tool name to arguments object: %w", f.callsFile, err)
		}
		for name, args := range m {
			if err := checkArgs(name, args); err != nil {
				return cfg, fmt.Errorf("--calls %s: %w", f.callsFile, err)
			}
			cfg.Calls[name] = args
		}
	}
	for _, c := range f.calls {
		name, args, ok := strings.Cut(c, "=")
		if !ok || name == "" {
			return cfg, fmt.Errorf("--call %q must be NAME=JSON, such as --call 'get_time={\"zone\":\"UTC\"}'", c)
		}
		if err := checkArgs(name, json.RawMessage(args)); err != nil {
			return cfg, fmt.Errorf("--call %s: %w", name, err)
		}
		cfg.Calls[name] = json.RawMessage(args)
	}
	return cfg, nil
}

func checkArgs(name string, args json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil || m == nil {
		return fmt.Errorf("the arguments of %s must be a JSON object, such as {} or {\"q\":\"x\"}", name)
	}
	return nil
}
