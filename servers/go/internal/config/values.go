package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"xferbench/servers/go/internal/limits"
)

// The flag values below print their current value, so the flag package
// records each default (and the help text shows it) without repeating it.

// sizeUnits are the suffixes of the size grammar of docs/DESIGN.md; the
// vectors every parser passes are in proto/testdata/size.vectors.
var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"KiB", 10}, {"MiB", 20}, {"GiB", 30}}

// ParseSize reads a size: plain bytes ("65536") or a whole number with
// KiB, MiB or GiB ("64KiB"), at most limit.
func ParseSize(s string, limit uint64) (uint64, error) {
	num, shift := s, uint(0)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	v, err := strconv.ParseUint(num, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("want bytes, or a whole number with KiB, MiB or GiB (65536, 64KiB, 4MiB), got %q", s)
	}
	if err != nil || v > limit>>shift {
		return 0, fmt.Errorf("%q exceeds the limit %d", s, limit)
	}
	return v << shift, nil
}

type sizeValue[T int | int32 | uint32 | uint64] struct {
	dst   *T
	limit uint64
}

func (v sizeValue[T]) String() string {
	if v.dst == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*v.dst), 10)
}

func (v sizeValue[T]) Set(s string) error {
	n, err := ParseSize(s, v.limit)
	if err == nil {
		*v.dst = T(n)
	}
	return err
}

type onOffValue struct{ dst *bool }

func (v onOffValue) String() string {
	if v.dst == nil || !*v.dst {
		return "off"
	}
	return "on"
}

func (v onOffValue) Set(s string) error {
	switch s {
	case "on":
		*v.dst = true
	case "off":
		*v.dst = false
	default:
		return fmt.Errorf("want on or off, got %q", s)
	}
	return nil
}

// maxConnsValue reads "auto" (limits.AutoConns, resolved at start from
// RLIMIT_NOFILE) or a positive count.
type maxConnsValue struct{ dst *int }

func (v maxConnsValue) String() string {
	if v.dst == nil || *v.dst == limits.AutoConns {
		return "auto"
	}
	return strconv.Itoa(*v.dst)
}

func (v maxConnsValue) Set(s string) error {
	if s == "auto" {
		*v.dst = limits.AutoConns
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("want auto or a positive integer, got %q", s)
	}
	*v.dst = n
	return nil
}

type uint32Value struct{ dst *uint32 }

func (v uint32Value) String() string {
	if v.dst == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*v.dst), 10)
}

func (v uint32Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("want an unsigned 32-bit integer, got %q", s)
	}
	*v.dst = uint32(n)
	return nil
}

const usageHeader = `usage: xferd-go [flags]

The Go file-transfer server of xferbench: gRPC and the frame protocol over one
store, /metrics and /debug/pprof on the metrics address (proto/PROTOCOL.md).

Every flag can also be set by the environment variable named beside it; the
command line wins. Without --gogc and --memlimit the Go runtime reads GOGC and
GOMEMLIMIT itself. Sizes: bytes, or a whole number with KiB, MiB or GiB
(65536, 64KiB, 4MiB). Durations: 500ms, 10s, 2m.

`

// metavars name the argument of the flag package's own value types.
var metavars = map[string]string{"int": "N", "duration": "DURATION", "string": "TEXT", "value": "VALUE"}

// printUsage writes the help: each flag with its argument, environment
// variable, meaning and default.
func printUsage(fs *flag.FlagSet, out io.Writer) {
	fmt.Fprint(out, usageHeader)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == versionFlag {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		if m, ok := metavars[arg]; ok {
			arg = m
		}
		fmt.Fprintf(out, "  --%s %s   [env %s]\n        %s", f.Name, arg, EnvName(f.Name), usage)
		if f.DefValue != "" {
			fmt.Fprintf(out, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(out)
	})
	fmt.Fprintf(out, "  --%s\n        %s\n", versionFlag, fs.Lookup(versionFlag).Usage)
	fmt.Fprintf(out, "  -h, --help\n        print this help and exit\n")
}
