// Command pprof-fold turns a Go CPU profile (the gzipped protobuf /debug/pprof/profile serves) into folded
// stacks, one line per distinct stack: "root;...;leaf COUNT", the format flame graph renderers and
// xferbench's classifier (xferbench/measure/profile/) read. Each frame is "function (binary)"; inlined calls are
// frames of their own, so runtime.mallocgc stays visible when the compiler inlines it into its caller.
//
// It uses github.com/google/pprof/profile, the parser of pprof itself, rather than a hand-written decoder
// of profile.proto on the Python side.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: pprof-fold PROFILE   (a Go CPU profile, as /debug/pprof/profile serves it)")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "pprof-fold:", err)
		os.Exit(1)
	}
	defer f.Close()
	if err := fold(f, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "pprof-fold: %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// noStack names a sample without locations, in perf's manner for frames it cannot name.
const noStack = "[no stack] (?)"

// fold writes the folded stacks of the profile read from r, counting samples (value index 0).
func fold(r io.Reader, w io.Writer) error {
	p, err := profile.Parse(r)
	if err != nil {
		return err
	}
	if len(p.SampleType) == 0 || p.SampleType[0].Type != "samples" {
		return fmt.Errorf("not a CPU profile: sample types %v", p.SampleType)
	}
	counts := map[string]int64{}
	for _, s := range p.Sample {
		var frames []string // leaf first, as pprof keeps them
		for _, loc := range s.Location {
			obj := "?"
			if loc.Mapping != nil && loc.Mapping.File != "" {
				obj = filepath.Base(loc.Mapping.File)
			}
			if len(loc.Line) == 0 {
				frames = append(frames, fmt.Sprintf("0x%x (%s)", loc.Address, obj))
			}
			for _, ln := range loc.Line { // innermost (inlined) first
				name := "?"
				if ln.Function != nil {
					name = ln.Function.Name
				}
				frames = append(frames, fmt.Sprintf("%s (%s)", strings.ReplaceAll(name, ";", ":"), obj))
			}
		}
		if len(frames) == 0 {
			// The runtime records a few samples with no stack at all (seen under load: a thread
			// interrupted where it could not unwind); they are CPU all the same, so they stay counted.
			frames = append(frames, noStack)
		}
		for i, j := 0, len(frames)-1; i < j; i, j = i+1, j-1 {
			frames[i], frames[j] = frames[j], frames[i]
		}
		counts[strings.Join(frames, ";")] += s.Value[0]
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		if counts[k] > 0 {
			fmt.Fprintf(bw, "%s %d\n", k, counts[k])
		}
	}
	return bw.Flush()
}
