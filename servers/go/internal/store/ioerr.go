package store

import (
	"errors"
	"io/fs"
	"os"
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
