package main

import (
	"github.com/gorap/gorap/conformance"
	"github.com/spf13/cobra"
)

// newConformanceToolCmd builds "rap conformance tool URL".
func newConformanceToolCmd(a *app) *cobra.Command {
	var ro reportOptions
	cmd := &cobra.Command{
		Use:    "tool URL [flags]",
		Short:  "check a RAP tool server against the protocol",
		Hidden: true, // until its checks are in
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Until its checks are in, the suite is empty.
			s := conformance.Suite{Name: "tool"}
			return ro.writeReport(a, s.Run(cmd.Context(), ro.runOptions(a, args[0], len(s.Checks()))))
		},
	}
	ro.register(cmd.Flags())
	return cmd
}
