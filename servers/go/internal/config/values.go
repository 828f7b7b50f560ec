package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

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

// durationUnits are the units of the duration grammar of docs/DESIGN.md,
// in the order a duration's terms must come, each in microseconds; the
// vectors every parser passes are in proto/testdata/duration.vectors.
var durationUnits = []struct {
	name string
	us   uint64
}{{"h", 3600e6}, {"m", 60e6}, {"s", 1e6}, {"ms", 1e3}, {"us", 1}}

const (
	// MaxDuration is the largest duration of the grammar: whole
	// microseconds that fit a time.Duration (2562047h47m16.854775s).
	MaxDuration = time.Duration(math.MaxInt64 / 1000 * 1000)
	// DurationHelp says what a duration looks like, in errors and --help.
	DurationHelp = "a number with h, m, s, ms or us, or several in that order (500ms, 10s, 2m, 1m30s, 1.5s); a bare number is seconds (15)"
	// maxFractionDigits bounds the digits after a number's point.
	maxFractionDigits = 9
	maxDurationUS     = uint64(MaxDuration / time.Microsecond)
	secondsRank       = 2 // durationUnits[secondsRank] is "s": a bare number's unit
)

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digitsEnd is the index of the first non-digit of s at or after i.
func digitsEnd(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

// ParseDuration reads a duration: one or more terms <number><unit>, units
// h, m, s, ms, us each at most once and in that order ("1m30s", "500ms"),
// or a bare number of seconds ("15"). A number may have a point and at most
// nine digits after it ("1.5s"); the whole must be whole microseconds, at
// most MaxDuration. No sign, space, exponent or other unit.
func ParseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("want %s, got %q", DurationHelp, s)
	if s == "" {
		return 0, bad
	}
	var total uint64
	over, last := false, -1
	for rest := s; rest != ""; {
		i := digitsEnd(rest, 0)
		if i == 0 {
			return 0, bad
		}
		whole, frac := rest[:i], ""
		if i < len(rest) && rest[i] == '.' {
			j := digitsEnd(rest, i+1)
			if j == i+1 || j-i-1 > maxFractionDigits {
				return 0, bad
			}
			frac, i = rest[i+1:j], j
		}
		k := i
		for k < len(rest) && !isDigit(rest[k]) && rest[k] != '.' {
			k++
		}
		rank := -1
		if unit := rest[i:k]; unit == "" {
			if len(rest) != len(s) || k != len(rest) {
				return 0, bad // a bare number is the whole duration: "1m30" is not one
			}
			rank = secondsRank
		} else {
			for r, u := range durationUnits {
				if u.name == unit {
					rank = r
				}
			}
			if rank <= last {
				return 0, bad // unknown, repeated or out of order
			}
		}
		last, rest = rank, rest[k:]
		u := durationUnits[rank].us
		w, err := strconv.ParseUint(whole, 10, 64)
		if err != nil || w > maxDurationUS/u {
			over = true
			continue
		}
		term := w * u
		if frac != "" {
			f, _ := strconv.ParseUint(frac, 10, 64) // at most 9 digits
			p := uint64(1)
			for range frac {
				p *= 10
			}
			if f*u%p != 0 { // f*u < 10^9 * 3.6e9 fits 64 bits
				return 0, bad // not whole microseconds
			}
			term += f * u / p
		}
		if total += term; total > maxDurationUS {
			over = true
		}
	}
	if over {
		return 0, fmt.Errorf("%q exceeds the largest duration, %s", s, FormatDuration(MaxDuration))
	}
	return time.Duration(total) * time.Microsecond, nil
}

// FormatDuration writes d in the duration grammar: time.Duration's own
// spelling ("1m30s", "1.5s", "500ms"), with "us" for its "µs".
func FormatDuration(d time.Duration) string {
	return strings.Replace(d.String(), "µs", "us", 1)
}

// DurationValue is a flag.Value that reads the duration grammar into *dst
// and prints it in the grammar.
type DurationValue struct{ Dst *time.Duration }

func (v DurationValue) String() string {
	if v.Dst == nil {
		return ""
	}
	return FormatDuration(*v.Dst)
}

func (v DurationValue) Set(s string) error {
	d, err := ParseDuration(s)
	if err == nil {
		*v.Dst = d
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
(65536, 64KiB, 4MiB). Durations: a number with h, m, s, ms or us, or several
in that order (500ms, 10s, 2m, 1m30s, 1.5s); a bare number is seconds (15).

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
