package toolsjson

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gorap/gorap/rap"
)

// Choices of a confirmation; Deny is the default.
var confirmChoices = []string{"Allow", "Deny"}

const confirmDeny = 1

// maxConfirmArgs bounds how much of the arguments a confirmation prompt
// shows.
const maxConfirmArgs = 4 << 10

// confirm asks the user, with a RAP user_choice, whether t may run with
// args. It returns nil on Allow and the call's Error text otherwise.
func (s *Server) confirm(ctx context.Context, c *rap.Call, t *Tool, args json.RawMessage) error {
	shown := string(args)
	if len(shown) > maxConfirmArgs {
		shown = shown[:maxConfirmArgs] + "…"
	}
	prompt := fmt.Sprintf("Allow the tool %q (%s) to run with these arguments?\n%s", t.ID, t.Description, shown)
	choice, err := c.AskUser(ctx, prompt, confirmChoices, confirmDeny, s.opts.ConfirmTimeout)
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if err != nil {
		s.log.Warn("tools.json confirmation could not be asked", "tool", t.ID, "err", err)
		return fmt.Errorf("Error: tool %q needs the user's confirmation, which could not be asked (%v); it did not run", t.ID, err)
	}
	if choice != 0 {
		return fmt.Errorf("Error: the user denied running tool %q; it did not run and nothing was changed. Do not call it again with these arguments unless the user asks; ask the user what to do instead", t.ID)
	}
	return nil
}
