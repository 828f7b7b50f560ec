package meta

import (
	"slices"
	"testing"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
	"xferbench/servers/go/internal/testvec"
	"xferbench/servers/go/internal/wirecheck"
)

const fuzzMaxEntries = 64

// FuzzMeta holds Answer to PROTOCOL.md "Meta" for any body the frame codec
// would decode: either invalid_argument, or every entry back exactly once,
// strictly sorted by key, within the bounds, with the digest of those entries.
func FuzzMeta(f *testing.F) {
	for _, v := range testvec.Lines(f, "meta.vectors") {
		f.Add(testvec.Hex(f, v[2]))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req xferv1.MetaRequest
		if wirecheck.Unmarshal(body, &req) != nil {
			return
		}
		resp, err := Answer(&req, fuzzMaxEntries)
		if err != nil {
			if errs.CodeOf(err) != errs.InvalidArgument {
				t.Fatalf("refusal with code %v: %v", errs.CodeOf(err), err)
			}
			return
		}
		in, out := req.GetEntries(), resp.GetEntries()
		if len(in) != len(out) || len(out) > fuzzMaxEntries {
			t.Fatalf("%d entries in, %d out (limit %d)", len(in), len(out), fuzzMaxEntries)
		}
		for i, e := range out {
			if len(e.Key) < 1 || len(e.Key) > MaxKey || len(e.Value) > MaxValue {
				t.Fatalf("entry %d out of bounds: key %d value %d bytes", i, len(e.Key), len(e.Value))
			}
			if i > 0 && out[i-1].Key >= e.Key {
				t.Fatalf("entries %d and %d not strictly sorted: %q %q", i-1, i, out[i-1].Key, e.Key)
			}
			j := slices.IndexFunc(in, func(r *xferv1.MetaEntry) bool { return r.Key == e.Key })
			if j < 0 || in[j].Value != e.Value {
				t.Fatalf("entry %q=%q is not one sent", e.Key, e.Value)
			}
		}
		if resp.Digest != Digest(out) {
			t.Fatalf("digest %08x, want %08x", resp.Digest, Digest(out))
		}
	})
}
