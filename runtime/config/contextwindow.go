package config

// This file owns the settings that bound what a model request carries of
// each tool result: the model's context window (rap serve
// --context-window, RAP_CONTEXT_WINDOW, or "context_window" in a rap.json
// file) and the share of it one result may take (--max-result-share,
// RAP_MAX_RESULT_SHARE, "max_result_share"). They map to
// runtime.Config.ContextWindow and MaxResultShare.

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Environment variables of the bounds on a model request.
const (
	// EnvContextWindow is the model's context window in tokens (a whole
	// number, at least MinContextWindow; 0 takes the model's own).
	EnvContextWindow = "RAP_CONTEXT_WINDOW"
	// EnvMaxResultShare is the share of the context window one tool
	// result may take in a model request (above 0, at most 1; 0 takes the
	// default, 0.1).
	EnvMaxResultShare = "RAP_MAX_RESULT_SHARE"
)

// Bounds of an accepted context window: below MinContextWindow no
// conversation fits, and above MaxContextWindow the number is a typo.
const (
	MinContextWindow = 1_000
	MaxContextWindow = 100_000_000
)

// parseContextWindow reads a context window: "0" (the model's own) or a
// whole number of tokens from MinContextWindow to MaxContextWindow.
func parseContextWindow(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || (n > 0 && n < MinContextWindow) || n > MaxContextWindow {
		return 0, fmt.Errorf("want a whole number of tokens from %d to %d such as 200000, or 0 to take the model's own", MinContextWindow, MaxContextWindow)
	}
	return n, nil
}

// parseMaxResultShare reads a share of the context window: a number
// above 0 and at most 1, or 0 for the default.
func parseMaxResultShare(v string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < 0 || f > 1 || math.IsNaN(f) {
		return 0, fmt.Errorf("want a share of the context window above 0 and at most 1 such as 0.1 (a tenth), or 0 for the default of 0.1")
	}
	return f, nil
}

// contextWindowValue is the --context-window flag: nil until set.
type contextWindowValue struct{ dst **int }

func (v contextWindowValue) String() string {
	if v.dst == nil || *v.dst == nil {
		return ""
	}
	return strconv.Itoa(**v.dst)
}

func (v contextWindowValue) Set(s string) error {
	n, err := parseContextWindow(s)
	if err != nil {
		return err
	}
	*v.dst = &n
	return nil
}

// Type names the flag's kind in help and errors (pflag.Value).
func (v contextWindowValue) Type() string { return "tokens" }

// shareValue is the --max-result-share flag: nil until set.
type shareValue struct{ dst **float64 }

func (v shareValue) String() string {
	if v.dst == nil || *v.dst == nil {
		return ""
	}
	return strconv.FormatFloat(**v.dst, 'g', -1, 64)
}

func (v shareValue) Set(s string) error {
	f, err := parseMaxResultShare(s)
	if err != nil {
		return err
	}
	*v.dst = &f
	return nil
}

// Type names the flag's kind in help and errors (pflag.Value).
func (v shareValue) Type() string { return "share" }

// EffectiveContextWindow returns the context window rap serve uses: the
// flag's or the environment's (Settings.ContextWindow) when set, else the
// first config file's "context_window" (f may be nil), else 0 (the
// model's own, or the runtime's default).
func (s *Settings) EffectiveContextWindow(f *File) int {
	if s.ContextWindow != nil {
		return *s.ContextWindow
	}
	if f != nil && f.ContextWindow != nil {
		return *f.ContextWindow
	}
	return 0
}

// EffectiveMaxResultShare returns the share of the context window one
// tool result may take that rap serve uses: the flag's or the
// environment's when set, else the first config file's
// "max_result_share", else 0 (the runtime's default).
func (s *Settings) EffectiveMaxResultShare(f *File) float64 {
	if s.MaxResultShare != nil {
		return *s.MaxResultShare
	}
	if f != nil && f.MaxResultShare != nil {
		return *f.MaxResultShare
	}
	return 0
}

// boundKeys are the members of a config file this file reads.
var boundKeys = []string{"context_window", "max_result_share"}

// parseFileBounds reads the "context_window" and "max_result_share"
// members of a config file into f; raw holds them, nil when absent.
func parseFileBounds(f *File, window, share json.RawMessage, name string) error {
	if window != nil {
		var n json.Number
		dec := json.NewDecoder(strings.NewReader(string(window)))
		dec.UseNumber()
		if err := dec.Decode(&n); err != nil {
			return &Error{File: name, Path: "context_window", Problem: "must be a number of tokens such as 200000"}
		}
		v, err := parseContextWindow(n.String())
		if err != nil {
			return &Error{File: name, Path: "context_window", Problem: fmt.Sprintf("%s: %v", n, err)}
		}
		f.ContextWindow = &v
	}
	if share != nil {
		var n json.Number
		dec := json.NewDecoder(strings.NewReader(string(share)))
		dec.UseNumber()
		if err := dec.Decode(&n); err != nil {
			return &Error{File: name, Path: "max_result_share", Problem: "must be a number such as 0.1 (a tenth of the context window)"}
		}
		v, err := parseMaxResultShare(n.String())
		if err != nil {
			return &Error{File: name, Path: "max_result_share", Problem: fmt.Sprintf("%s: %v", n, err)}
		}
		f.MaxResultShare = &v
	}
	return nil
}
