package termchat

import (
	"errors"
	"fmt"
)

// Exit statuses of the terminal client, as "rap chat --help" and
// "rap demo --help" state them.
const (
	// ExitFailure: the runtime refused a request (a 401, a message it
	// would not take), reported a failure, the stream broke, or --wait
	// expired before the thread was quiet; for the demo, a step it shows
	// did not happen.
	ExitFailure = 1
	// ExitUsage: bad flags or arguments.
	ExitUsage = 2
)

// ExitError is an error that carries the exit status the command should
// end with.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the exit status for err: 0 for nil, the code of an
// *ExitError in its chain, else ExitFailure.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitFailure
}

func failure(format string, args ...any) error {
	return &ExitError{Code: ExitFailure, Err: fmt.Errorf(format, args...)}
}

func usage(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}
