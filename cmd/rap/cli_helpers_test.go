package main

import (
	"github.com/spf13/pflag"

	"github.com/gorap/gorap/runtime/config"
)

// serveSettingsFor resolves rap serve's settings from args and the
// environment as the serve verb does, without serving.
func serveSettingsFor(args ...string) (config.Settings, error) {
	s := config.Defaults(getenvOS)
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	addSettingsFlags(fs, &s)
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if err := applyEnv(fs, getenvOS); err != nil {
		return s, err
	}
	err := useProjectDataDir(&s, fs.Changed("data-dir"))
	return s, err
}
