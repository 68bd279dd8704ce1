package main

import (
	"github.com/gorap/gorap/conformance"
	"github.com/spf13/cobra"
)

// newConformanceRuntimeCmd builds "rap conformance runtime".
func newConformanceRuntimeCmd(a *app) *cobra.Command {
	var ro reportOptions
	cmd := &cobra.Command{
		Use:    "runtime [flags]",
		Short:  "check a RAP runtime against the protocol",
		Hidden: true, // until its checks are in
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Until its checks are in, the suite is empty.
			s := conformance.Suite{Name: "runtime"}
			return ro.writeReport(a, s.Run(cmd.Context(), ro.runOptions(a, "a runtime", len(s.Checks()))))
		},
	}
	ro.register(cmd.Flags())
	return cmd
}
