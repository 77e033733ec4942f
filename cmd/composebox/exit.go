package main

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/composebox/composebox/internal/errdefs"
)

// Exit codes, a fixed surface that scripts rely on (the README lists them).
const (
	exitOK        = 0
	exitUsage     = 2
	exitTimeout   = 124
	exitFailure   = 125
	exitCannotRun = 126
	exitNotFound  = 127
	// A signal exits 128+its number, as a shell reports it: 130 for SIGINT, 143 for SIGTERM,
	// once the cleanup it triggered is done.
	exitInterrupted = 130
	exitTerminated  = 143
)

// interrupted is the cause of the context a signal cancelled.
type interrupted struct{ sig syscall.Signal }

func (i interrupted) Error() string { return fmt.Sprintf("interrupted by %s", signalName(i.sig)) }

func (i interrupted) exitCode() int { return 128 + int(i.sig) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// usageError is a command line that cannot be understood: exit 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// exitError carries an exit code to pass through (an exec'd command's, say). A silent one
// prints nothing: the command's own output already told the story.
type exitError struct {
	code   int
	silent bool
	err    error
}

func (e exitError) Error() string {
	if e.err == nil {
		return "exit status"
	}
	return e.err.Error()
}
func (e exitError) Unwrap() error { return e.err }

func errorKind(err error) string { return errdefs.Kind(err) }

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	var ee exitError
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, errdefs.ErrTimeout):
		return exitTimeout
	}
	return exitFailure
}

type errUsage string

func (e errUsage) Error() string { return string(e) }
