package store

import (
	"strings"
	"unicode/utf8"

	"xferbench/servers/go/internal/content"
	"xferbench/servers/go/internal/errs"
)

// MaxNameLen is PROTOCOL.md's bound on a name, in bytes.
const MaxNameLen = 255

// ValidateName checks a name as PROTOCOL.md's "Names" says; gen: names pass
// here (they are a valid name) and are handled by the callers.
func ValidateName(name string) error {
	switch {
	case name == "":
		return errs.New(errs.InvalidArgument, "name %q is empty", name)
	case len(name) > MaxNameLen:
		return errs.New(errs.InvalidArgument, "name %q is %d bytes, limit %d", name, len(name), MaxNameLen)
	case !utf8.ValidString(name):
		return errs.New(errs.InvalidArgument, "name %q is not valid UTF-8", name)
	case strings.Contains(name, "/"):
		return errs.New(errs.InvalidArgument, "name %q contains '/'", name)
	case strings.Contains(name, `\`):
		return errs.New(errs.InvalidArgument, `name %q contains '\'`, name)
	case strings.Contains(name, "\x00"):
		return errs.New(errs.InvalidArgument, "name %q contains NUL", name)
	case name == "." || name == "..":
		return errs.New(errs.InvalidArgument, "name %q is not allowed", name)
	}
	return nil
}

// validateUploadName also refuses the reserved gen: namespace.
func validateUploadName(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	if content.IsGen(name) {
		return errs.New(errs.InvalidArgument, "name %q is reserved for generated content", name)
	}
	return nil
}
