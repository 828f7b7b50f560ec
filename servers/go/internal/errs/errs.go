// Package errs is the error type shared by both transports: a code named
// after a gRPC status code and a message naming what was wrong. Frame
// carries it as the string "<code>: <message>"; gRPC carries the code as
// the status code and the message as the status message (PROTOCOL.md).
package errs

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Code is a gRPC status code; its String is the snake-case name of the wire.
type Code codes.Code

// The codes PROTOCOL.md uses, plus OK for metrics.
const (
	OK                 = Code(codes.OK)
	InvalidArgument    = Code(codes.InvalidArgument)
	NotFound           = Code(codes.NotFound)
	FailedPrecondition = Code(codes.FailedPrecondition)
	OutOfRange         = Code(codes.OutOfRange)
	DataLoss           = Code(codes.DataLoss)
	ResourceExhausted  = Code(codes.ResourceExhausted)
	Unimplemented      = Code(codes.Unimplemented)
	Internal           = Code(codes.Internal)
)

// snake names every gRPC code so a status from grpc-go itself (e.g. a
// cancelled stream) still gets a metrics label of the same family.
var snake = map[codes.Code]string{
	codes.OK:                 "ok",
	codes.Canceled:           "cancelled", // gRPC's own spelling (CANCELLED), as Python's grpc.StatusCode
	codes.Unknown:            "unknown",
	codes.InvalidArgument:    "invalid_argument",
	codes.DeadlineExceeded:   "deadline_exceeded",
	codes.NotFound:           "not_found",
	codes.AlreadyExists:      "already_exists",
	codes.PermissionDenied:   "permission_denied",
	codes.ResourceExhausted:  "resource_exhausted",
	codes.FailedPrecondition: "failed_precondition",
	codes.Aborted:            "aborted",
	codes.OutOfRange:         "out_of_range",
	codes.Unimplemented:      "unimplemented",
	codes.Internal:           "internal",
	codes.Unavailable:        "unavailable",
	codes.DataLoss:           "data_loss",
	codes.Unauthenticated:    "unauthenticated",
}

// String is the snake-case name used on the wire and in metrics.
func (c Code) String() string {
	if s, ok := snake[codes.Code(c)]; ok {
		return s
	}
	return "unknown"
}

// Error is a call or connection error with its code.
type Error struct {
	Code Code
	Msg  string
}

// Error renders the frame protocol's "<code>: <message>".
func (e *Error) Error() string { return e.Code.String() + ": " + e.Msg }

// GRPCStatus lets grpc-go send e with its code and bare message.
func (e *Error) GRPCStatus() *status.Status { return status.New(codes.Code(e.Code), e.Msg) }

// New formats a message under a code.
// String arguments go through subject, so %q quotes them as PROTOCOL.md says.
func New(c Code, format string, args ...any) *Error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = subject(s)
		}
	}
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf gives the code of err for metrics: nil is OK, an *Error its code,
// anything carrying a gRPC status that status's code, the rest Internal.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if s, ok := status.FromError(err); ok {
		return Code(s.Code())
	}
	return Internal
}

// CodeOfString recovers the code of a frame error string "<code>: ...";
// strings not in that form count as internal.
func CodeOfString(s string) Code {
	if s == "" {
		return OK
	}
	name, _, ok := strings.Cut(s, ":")
	if ok {
		for c, n := range snake {
			if n == name {
				return Code(c)
			}
		}
	}
	return Internal
}
