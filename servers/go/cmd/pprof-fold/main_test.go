package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// A CPU profile built by hand: two samples of one stack (with an inlined frame) and one of another fold
// into two lines, outermost frame first, inlined calls as frames of their own; a sample with no stack is
// counted under "[no stack]".
func TestFoldCountsStacksOutermostFirst(t *testing.T) {
	m := &profile.Mapping{ID: 1, File: "/x/build/bin/xferd-go"}
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	handle, alloc, clr := fn(1, "main.handle"), fn(2, "runtime.mallocgc"), fn(3, "runtime.memclrNoHeapPointers")
	outer := &profile.Location{ID: 1, Mapping: m, Line: []profile.Line{{Function: handle}}}
	// One location, two lines: memclr inlined into mallocgc (innermost first, as pprof keeps them).
	inner := &profile.Location{ID: 2, Mapping: m, Line: []profile.Line{{Function: clr}, {Function: alloc}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{inner, outer}, Value: []int64{2, 20e6}},
			{Location: []*profile.Location{outer}, Value: []int64{1, 10e6}},
			{Location: nil, Value: []int64{3, 30e6}}, // no stack: still CPU, under a name of its own
		},
		Location: []*profile.Location{outer, inner}, Function: []*profile.Function{handle, alloc, clr},
		Mapping: []*profile.Mapping{m}, PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period: 10e6,
	}
	var enc bytes.Buffer
	if err := p.Write(&enc); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := fold(&enc, &out); err != nil {
		t.Fatal(err)
	}
	want := "[no stack] (?) 3\n" +
		"main.handle (xferd-go) 1\n" +
		"main.handle (xferd-go);runtime.mallocgc (xferd-go);runtime.memclrNoHeapPointers (xferd-go) 2\n"
	if out.String() != want {
		t.Fatalf("folded:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestFoldRejectsANonCPUProfile(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}
	var enc bytes.Buffer
	if err := p.Write(&enc); err != nil {
		t.Fatal(err)
	}
	err := fold(&enc, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "not a CPU profile") {
		t.Fatalf("err = %v, want 'not a CPU profile'", err)
	}
}
