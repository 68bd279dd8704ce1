package main

// "rap conformance tool|runtime": check a RAP tool server or runtime, in any
// language, against the protocol. The suites live in package conformance;
// this file holds the verb and the report options both subcommands share
// (conformance_tool.go and conformance_runtime.go hold the subcommands).

import (
	"fmt"
	"os"
	"time"

	"github.com/gorap/gorap/conformance"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newConformanceCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "conformance KIND [flags] [arguments]",
		Short: "check a RAP tool server or runtime, in any language, against the protocol (rap conformance tool|runtime ...)",
		Long: `Checks that a RAP tool server or runtime, written in any language, behaves
as the protocol requires, and says where it does not, with a one-line fix
for each failure.

Each check is tagged MUST (the protocol requires it), SHOULD (it recommends
it) or EXTENSION (a gorap extension, checked where the implementation says
it supports it), and cites its rule. docs/conformance.md explains every
check and shows how to run the kit in another project's CI.

Exit status: 0 when no MUST check failed, 1 when one did or the
implementation could not be reached, 2 for bad flags.`,
		Example: `  rap conformance tool http://127.0.0.1:3001
  rap conformance tool http://127.0.0.1:3001 --junit conformance.xml
  rap conformance runtime --help`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return unknownSubcommand(cmd, args, "say what to check")
		},
	}
	cmd.AddCommand(newConformanceToolCmd(a), newConformanceRuntimeCmd(a))
	return cmd
}

// reportOptions are the flags that choose how a conformance report is
// shown, common to both subcommands.
type reportOptions struct {
	json         bool
	junit        string
	verbose      bool
	quiet        bool
	only         []string
	checkTimeout time.Duration
}

func (o *reportOptions) register(fs *pflag.FlagSet) {
	o.checkTimeout = time.Minute
	fs.BoolVar(&o.json, "json", false, "print one JSON object a check (id, level, rule, title, status, message, fix) instead of the table")
	fs.StringVar(&o.junit, "junit", "", "also write the report as JUnit XML to `FILE`, for CI systems")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "show the HTTP exchanges behind each failed check, and why each skipped check was skipped")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print no progress on standard error while the checks run")
	fs.StringSliceVar(&o.only, "only", nil, "run only the checks with these `IDS` or ID prefixes (comma-separated: tool.cancel,tool.close)")
	fs.DurationVar(&o.checkTimeout, "check-timeout", o.checkTimeout, "fail a check still waiting after `DURATION`")
}

// runOptions turns the flags into the suite's run options, with progress
// lines on standard error unless --quiet.
func (o *reportOptions) runOptions(a *app, subject string, total int) conformance.RunOptions {
	ro := conformance.RunOptions{Subject: subject, CheckTimeout: o.checkTimeout, Only: o.only}
	if !o.quiet {
		n := 0
		ro.Progress = func(res conformance.Result) {
			n++
			if res.Status == conformance.Skip && res.Message == "not selected" {
				return
			}
			fmt.Fprintf(a.stderr, "[%d/%d] %s\n", n, total, res)
		}
	}
	return ro
}

// writeReport prints the report as the flags ask, writes the JUnit file
// when asked, and returns exit status 1 when a MUST check failed.
func (o *reportOptions) writeReport(a *app, rep *conformance.Report) error {
	if o.junit != "" {
		f, err := os.OpenFile(o.junit, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("writing the JUnit report: %w", err)
		}
		err = rep.WriteJUnit(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("writing the JUnit report to %s: %w", o.junit, err)
		}
	}
	var err error
	if o.json {
		err = rep.WriteJSON(a.stdout, o.verbose)
	} else {
		err = rep.WriteText(a.stdout, o.verbose)
	}
	if err != nil {
		return err
	}
	if rep.Failed() {
		return exitError{exitFailure}
	}
	return nil
}
