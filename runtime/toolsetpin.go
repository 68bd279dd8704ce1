package runtime

// This file owns the integrity pins of tool servers' discovery documents
// (RAP TS-11): a document whose RFC 8785 SHA-256 differs from the digest
// the configuration pins, or, with trust on first use, from the digest the
// session recorded when it first discovered the tool server, is refused:
// none of its tools is offered in the session, and the problem is reported
// where discovery problems are (the log, the "toolsets" event, the
// session's toolsets in the client API).

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// ToolsetPin verifies the discovery documents of one tool server (RAP
// TS-11). The digest of a document is rap.ToolsetDigest: the lowercase hex
// SHA-256 of its RFC 8785 canonical form.
type ToolsetPin struct {
	// SHA256, when set, is the only digest accepted.
	SHA256 string
	// FirstUse trusts the document a session first discovers, recording
	// its digest in the store (store.ToolsetTrust), and refuses a document
	// with another digest for the rest of that session, across restarts
	// and on every process of a shared store. A new session trusts the
	// document it discovers.
	FirstUse bool
	// File and Entry say where the pin is configured, for the messages
	// that tell the operator what to change, such as
	// "/home/me/.config/rap/rap.json" and "tool_sets[0]". Both may be empty.
	File, Entry string
}

// checkToolsetPins reports the pins New refuses: a malformed digest, a
// digest together with first use, a pin of a tool server not configured.
func checkToolsetPins(servers []string, pins map[string]ToolsetPin) []string {
	var problems []string
	for _, base := range slices.Sorted(maps.Keys(pins)) {
		p := pins[base]
		if !slices.Contains(servers, base) {
			problems = append(problems, fmt.Sprintf("ToolsetPins[%q]: no tool server with this base URL in ToolServers; pins are keyed by the base URL exactly as ToolServers lists it", base))
		}
		if p.SHA256 != "" && !rap.IsToolsetDigest(p.SHA256) {
			problems = append(problems, fmt.Sprintf("ToolsetPins[%q].SHA256 %q is not 64 lowercase hex digits (rap.ToolsetDigest)", base, p.SHA256))
		}
		if p.SHA256 != "" && p.FirstUse {
			problems = append(problems, fmt.Sprintf("ToolsetPins[%q] sets both SHA256 and FirstUse; SHA256 already fixes the one trusted document", base))
		}
	}
	return problems
}

// where names the pin's configuration for messages.
func (p ToolsetPin) where() string {
	switch {
	case p.File != "" && p.Entry != "":
		return fmt.Sprintf("%s (%s)", p.File, p.Entry)
	case p.File != "":
		return p.File
	case p.Entry != "":
		return p.Entry
	}
	return "the runtime's configuration"
}

// pinnedDoc is a session's document of a pinned tool server on its way to
// the session's catalog.
type pinnedDoc struct {
	c      store.CachedToolset
	what   string // where it came from, such as "the toolset document it serves"
	pin    ToolsetPin
	digest string
}

// verifyPins returns the session's documents it may use, in their order,
// and the problems of those it may not. what describes where a document
// came from, for the messages. Digests trusted on first use are recorded
// in the store; when that fails, the first-use documents are refused and
// the error is returned too.
func (r *Runtime) verifyPins(ctx context.Context, rootID string, cache []store.CachedToolset, what func(store.CachedToolset) string) ([]store.CachedToolset, []string, error) {
	if len(r.cfg.ToolsetPins) == 0 {
		return cache, nil, nil
	}
	refused := make([]bool, len(cache))
	var problems []string
	var firstUse []int
	docs := make([]pinnedDoc, len(cache))
	for i, c := range cache {
		pin, ok := r.cfg.ToolsetPins[c.BaseURL]
		if !ok || (pin.SHA256 == "" && !pin.FirstUse) {
			continue
		}
		d := pinnedDoc{c: c, what: what(c), pin: pin}
		digest, err := rap.ToolsetDigest(c.Manifest)
		if err != nil {
			refused[i] = true
			problems = append(problems, r.refuse(rootID, d, fmt.Sprintf("tool server %s: refused: %s cannot be checked against the pin in %s: %v; its tools are not available in this session",
				c.BaseURL, d.what, pin.where(), err)))
			continue
		}
		d.digest = digest
		docs[i] = d
		switch {
		case pin.SHA256 != "" && digest != pin.SHA256:
			refused[i] = true
			problems = append(problems, r.refuse(rootID, d, fmt.Sprintf("tool server %s: refused: %s has sha256 %s, but %s pins sha256 %s; its tools are not available in this session. If the change is expected, update \"sha256\" in %s to %q; otherwise find out why the tool server's toolset changed",
				c.BaseURL, d.what, digest, pin.where(), pin.SHA256, pin.where(), digest)))
		case pin.SHA256 == "":
			firstUse = append(firstUse, i)
		}
	}
	var storeErr error
	if len(firstUse) > 0 {
		trusted := make([]string, len(firstUse))
		storeErr = r.store.Update(ctx, func(tx store.Tx) error {
			for k, i := range firstUse {
				t, err := tx.TrustToolset(rootID, cache[i].BaseURL, docs[i].digest)
				if err != nil {
					return err
				}
				trusted[k] = t
			}
			return nil
		})
		for k, i := range firstUse {
			d := docs[i]
			switch {
			case storeErr != nil:
				refused[i] = true
				problems = append(problems, fmt.Sprintf("tool server %s: refused: the digest this session trusted on first use could not be read or recorded (%v); its tools are not available in this session",
					d.c.BaseURL, storeErr))
			case trusted[k] != d.digest:
				refused[i] = true
				problems = append(problems, r.refuse(rootID, d, fmt.Sprintf("tool server %s: refused: %s has sha256 %s, but this session trusted sha256 %s when it first discovered it (\"pin\": %q in %s); its tools are not available in this session. If the change is expected, start a new session: it trusts the document it discovers",
					d.c.BaseURL, d.what, d.digest, trusted[k], "first_use", d.pin.where())))
			}
		}
		if storeErr != nil {
			storeErr = fmt.Errorf("check the toolset digests session %s trusted on first use: %w", rootID, storeErr)
		}
	}
	kept := make([]store.CachedToolset, 0, len(cache))
	for i, c := range cache {
		if !refused[i] {
			kept = append(kept, c)
		}
	}
	return kept, problems, storeErr
}

// refuse logs a refused document and returns the problem.
func (r *Runtime) refuse(rootID string, d pinnedDoc, problem string) string {
	r.log.Error("toolset refused: its discovery document does not match its pin", "thread", rootID, "base_url", d.c.BaseURL,
		"sha256", d.digest, "pinned_sha256", d.pin.SHA256, "first_use", d.pin.FirstUse, "config", d.pin.where())
	return problem
}
