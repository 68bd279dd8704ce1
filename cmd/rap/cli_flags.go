package main

// Flags shared by the verbs, environment variables behind flags, and the
// messages for bad values: a bad flag value and a bad environment variable
// give the same message, because one function (checkValue, through the
// flag's own Set) validates both.

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/gorap/gorap/internal/spelling"
	"github.com/gorap/gorap/runtime/config"
)

// envAnnotation is the flag annotation naming the environment variable
// read when the flag is not given.
const envAnnotation = "rap_env"

// splitAnnotation is the flag annotation of a list flag's environment
// variable: the separator of its items, each passed to Set.
const splitAnnotation = "rap_env_split"

// envLogFormat is the environment variable of --log-format (--log-level's
// is config.EnvLogLevel).
const envLogFormat = "RAP_LOG_FORMAT"

// Messages for values of the persistent flags.
const (
	wantLogLevel  = "want debug, info, warn or error"
	wantLogFormat = "want text or json"
)

// bindEnv makes the environment variable env the default of flag name of
// fs: when the command line does not set the flag, a non-empty env is
// parsed by the flag itself. The flag's help says so.
func bindEnv(fs *pflag.FlagSet, name, env string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("rap: bindEnv: no flag --" + name)
	}
	_ = fs.SetAnnotation(name, envAnnotation, []string{env})
	if !strings.Contains(f.Usage, env) {
		f.Usage += " (env " + env + ")"
	}
}

// aliasAnnotation marks a deprecated flag that sets the same value as the
// flag it names.
const aliasAnnotation = "rap_alias_of"

// applyEnv sets every flag of fs that has an environment variable, was not
// given on the command line (under its name or a deprecated alias), and
// whose variable is set.
func applyEnv(fs *pflag.FlagSet, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) {
		given[f.Name] = true
		if of := f.Annotations[aliasAnnotation]; len(of) > 0 {
			given[of[0]] = true
		}
	})
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if err != nil || len(env) == 0 || given[f.Name] {
			return
		}
		v := getenv(env[0])
		if v == "" {
			return
		}
		items := []string{v}
		if sep := f.Annotations[splitAnnotation]; len(sep) > 0 {
			items = strings.Split(v, sep[0])
		}
		for _, item := range items {
			if e := checkValue(f, env[0], item); e != nil {
				err = e
				return
			}
		}
	})
	return err
}

// checkValue sets flag f to value, which came from source (an environment
// variable name, or the flag's --name), and explains a bad value.
func checkValue(f *pflag.Flag, source, value string) error {
	if err := f.Value.Set(value); err != nil {
		return badValue(f, source, value, err)
	}
	return nil
}

// badValue is the one message for a bad flag value and a bad environment
// variable: what was wrong, where it came from and what is wanted.
func badValue(f *pflag.Flag, source, value string, cause error) error {
	return usageErrorf("invalid value %q for %s: %s", value, source, explainValue(f, cause))
}

// explainValue says what a flag wants, in place of a parser's terse error.
func explainValue(f *pflag.Flag, cause error) string {
	if msg := cause.Error(); strings.HasPrefix(msg, "want ") {
		return msg // the value's own parser already says what it wants (--lease-ttl)
	}
	switch f.Value.Type() {
	case "duration":
		return "want a Go duration such as 90s, 5m or 1h30m"
	case "int", "int64", "uint", "uint64":
		return "want a whole number such as 10"
	case "bool":
		return "want true or false"
	case "float64":
		return "want a number such as 0.5"
	}
	return cause.Error()
}

// flagError turns pflag's parse errors into usage errors with the shared
// bad-value message, and suggests a flag for a mistyped one.
func flagError(cmd *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		return badValue(iv.GetFlag(), "--"+iv.GetFlag().Name, iv.GetValue(), iv.Unwrap())
	}
	var ne *pflag.NotExistError
	if errors.As(err, &ne) && ne.GetSpecifiedShortnames() == "" {
		if s := suggestFlags(cmd, ne.GetSpecifiedName()); len(s) > 0 {
			return usageErrorf("unknown flag --%s\n\nDid you mean this?\n\t--%s", ne.GetSpecifiedName(), strings.Join(s, "\n\t--"))
		}
		return usageErrorf("unknown flag --%s", ne.GetSpecifiedName())
	}
	return fmt.Errorf("%w: %v", errUsage, err)
}

// suggestFlags returns the visible flags of cmd whose names are close to
// typed: at most two edits away, or starting with it.
func suggestFlags(cmd *cobra.Command, typed string) []string {
	var out []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		if closeFlagName(typed, f.Name) {
			out = append(out, f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	sort.Strings(out)
	return out
}

// closeFlagName reports whether typed looks like a typo of name: at most two
// edits away, a prefix of it, or one edit away from one of its words (as
// "tokn" from "tool-token").
func closeFlagName(typed, name string) bool {
	if spelling.Distance(typed, name) <= 2 || (len(typed) >= 3 && strings.HasPrefix(name, typed)) {
		return true
	}
	if len(typed) < 4 || !strings.Contains(name, "-") {
		return false
	}
	for _, w := range strings.Split(name, "-") {
		if spelling.Distance(typed, w) <= 1 {
			return true
		}
	}
	return false
}

// enumValue is a string flag restricted to a few values.
type enumValue struct {
	p       *string
	allowed []string
	want    string // the message for another value, such as "want text or json"
}

func (v *enumValue) String() string { return *v.p }
func (v *enumValue) Type() string   { return "string" }
func (v *enumValue) Set(s string) error {
	if !slices.Contains(v.allowed, strings.ToLower(s)) {
		return errors.New(v.want)
	}
	*v.p = strings.ToLower(s)
	return nil
}

// secretValue is a string flag whose value is never shown in help output.
type secretValue string

func (v *secretValue) String() string     { return "" }
func (v *secretValue) Type() string       { return "secret" }
func (v *secretValue) Set(s string) error { *v = secretValue(s); return nil }

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ", ") }
func (m *multiFlag) Type() string       { return "stringArray" }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// addToolTokenFlag defines --tool-token, the bearer token between a
// runtime and a tool server, read from RAP_TOOL_TOKEN when not given.
// --token, its old spelling in the verbs that talk only to tool servers,
// still works but is hidden and deprecated: --token is the runtime's
// client token (rap chat, rap serve).
func addToolTokenFlag(fs *pflag.FlagSet, p *string, usage string) {
	fs.Var((*secretValue)(p), "tool-token", usage)
	bindEnv(fs, "tool-token", config.EnvToolToken)
	fs.Var((*secretValue)(p), "token", usage)
	_ = fs.SetAnnotation("token", aliasAnnotation, []string{"tool-token"})
	_ = fs.MarkDeprecated("token", "use --tool-token: --token is the runtime's client token (RAP_TOKEN)")
}

// noArgs rejects positional arguments as a usage error.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}
