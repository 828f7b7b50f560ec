package store

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"xferbench/servers/go/internal/errs"
)

// ioErr strips the file names os wraps around a system error: an internal
// error goes to clients and must never name a server path (PROTOCOL.md
// "Errors"), so only the cause ("no space left on device") is kept.
func ioErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

// fdExhausted is resource_exhausted when err is the process running out of
// descriptors (PROTOCOL.md "Errors"): a load problem, not a server fault.
// nil for any other error.
func fdExhausted(err error) error {
	if errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
		return errs.New(errs.ResourceExhausted, "out of file descriptors")
	}
	return nil
}
