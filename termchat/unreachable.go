package termchat

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
)

// unreachable reports whether err says the runtime could not be reached
// or answered that it is not ready: it restarts, or a proxy in front of it
// has no backend for a moment. A chat waiting for a thread waits on
// through such errors (until its wait ends) instead of giving up, as the
// event stream, which reconnects by itself, does.
func unreachable(ctx context.Context, err error) bool {
	if err == nil || ctx.Err() != nil {
		return false
	}
	switch StatusOf(err) {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case 0:
		var op *net.OpError
		return errors.As(err, &op) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	}
	return false
}
