package model

// This file owns the provider-neutral side of a provider's own
// compaction: a model API that summarises a long conversation itself
// (Anthropic's server-side compaction) when a request passes a number of
// input tokens, and answers with a block that stands for everything
// before it in later requests.

import "fmt"

// ServerCompactor is implemented by a Provider whose API can compact a
// conversation on its side. It is optional: the runtime asks with a type
// assertion (ServerCompaction).
type ServerCompactor interface {
	// ServerCompaction reports whether the provider's model compacts on
	// the API's side: minTrigger is then the fewest input tokens the API
	// takes as Request.CompactAt; otherwise err says why it does not, in
	// words for the person who chose the model.
	ServerCompaction() (minTrigger int, err error)
}

// ServerCompaction returns the fewest input tokens p's own compaction can
// be set to start at, or an error that says why p has none.
func ServerCompaction(p Provider) (minTrigger int, err error) {
	if c, ok := p.(ServerCompactor); ok {
		return c.ServerCompaction()
	}
	return 0, fmt.Errorf("%s has no compaction of its own that gorap can use (only Anthropic's models with server-side compaction have one)", p.Name())
}

// CompactionBlock is a compaction the provider's API made while it
// answered (Request.CompactAt): a summary of the conversation up to and
// including the request's last message. Later requests of the
// conversation carry Raw (Request.Compaction) instead of those messages.
type CompactionBlock struct {
	// Summary is the summary's readable text.
	Summary string
	// Raw is the block as the API sent it, to be sent back byte for
	// byte; the provider's own format.
	Raw []byte
	// Usage is what the API reported the compaction itself cost, zero
	// when it reported nothing apart.
	Usage Usage
}
