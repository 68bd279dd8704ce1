package termchat

import (
	"context"

	"github.com/gorap/gorap/runtime/client"
)

// unreachable reports whether err says the runtime could not be reached
// or is busy or restarting (client.Temporary), while ctx still runs: a
// chat waiting for a thread waits on through such errors (until its wait
// ends) instead of giving up, as the event stream does.
func unreachable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && client.Temporary(err)
}
