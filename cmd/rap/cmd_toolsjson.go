package main

import (
	"github.com/spf13/cobra"
)

// newToolsJSONCmd is "rap toolsjson init|digest DIR".
func newToolsJSONCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "toolsjson init|digest DIR",
		Short: "author tools.json bundles: init DIR writes an empty signed bundle, digest DIR re-pins tools.json",
		Example: `  rap toolsjson init agents/weather
  rap toolsjson digest agents/weather`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return unknownSubcommand(cmd, args, "say what to do")
		},
	}
	dirArg := func(args []string) error {
		if len(args) != 1 {
			return usageErrorf("want one DIR, got %d arguments", len(args))
		}
		return nil
	}
	cmd.AddCommand(&cobra.Command{
		Use:     "init DIR",
		Short:   "write an empty tools.json in DIR and pin its BLAKE3 digest in DIR/manifest.toml",
		Example: "  rap toolsjson init agents/weather",
		RunE: func(_ *cobra.Command, args []string) error {
			if err := dirArg(args); err != nil {
				return err
			}
			return toolsJSONInit(args[0], a.stdout)
		},
	}, &cobra.Command{
		Use:     "digest DIR",
		Short:   "pin the BLAKE3 digest of DIR/tools.json in DIR/manifest.toml after editing it",
		Example: "  rap toolsjson digest agents/weather",
		RunE: func(_ *cobra.Command, args []string) error {
			if err := dirArg(args); err != nil {
				return err
			}
			return toolsJSONDigest(args[0], a.stdout)
		},
	})
	return cmd
}
