// Package meta answers the Meta call (PROTOCOL.md "Meta"): many small
// key/value entries decoded into Go strings and a map, checked, and sent back
// sorted by key with a CRC-32 digest. Both transports call Answer.
package meta

import (
	"hash/crc32"
	"slices"
	"strings"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/errs"
)

// Fixed bounds of one entry (PROTOCOL.md's limit table).
const (
	MaxKey   = 256
	MaxValue = 4096
)

// Answer checks req against maxEntries and the entry bounds and returns the
// response: the entries sorted by key and their digest. The map is the
// server's "natural structure" for metadata; building it is the allocation
// work this call exists to measure, and it finds duplicate keys.
func Answer(req *xferv1.MetaRequest, maxEntries int) (*xferv1.MetaResponse, error) {
	in := req.GetEntries()
	if len(in) > maxEntries {
		return nil, errs.New(errs.InvalidArgument, "%d entries exceed limit %d (--max-meta-entries)", len(in), maxEntries)
	}
	for i, e := range in {
		if err := checkEntry(i, e.GetKey(), e.GetValue()); err != nil {
			return nil, err
		}
	}
	m := make(map[string]string, len(in))
	for _, e := range in {
		if _, dup := m[e.GetKey()]; dup {
			return nil, errs.New(errs.InvalidArgument, "duplicate key %q", e.GetKey())
		}
		m[e.GetKey()] = e.GetValue()
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys) // Go compares strings bytewise, as PROTOCOL.md orders keys
	out := &xferv1.MetaResponse{Entries: make([]*xferv1.MetaEntry, len(keys))}
	for i, k := range keys {
		out.Entries[i] = &xferv1.MetaEntry{Key: k, Value: m[k]}
	}
	out.Digest = Digest(out.Entries)
	return out, nil
}

func checkEntry(i int, k, v string) error {
	switch {
	case len(k) < 1 || len(k) > MaxKey:
		return errs.New(errs.InvalidArgument, "entry %d key length %d is outside 1..%d", i, len(k), MaxKey)
	case len(v) > MaxValue:
		return errs.New(errs.InvalidArgument, "entry %d value length %d exceeds limit %d", i, len(v), MaxValue)
	case strings.IndexByte(k, 0) >= 0:
		return errs.New(errs.InvalidArgument, "entry %d key contains NUL", i)
	case strings.IndexByte(v, 0) >= 0:
		return errs.New(errs.InvalidArgument, "entry %d value contains NUL", i)
	}
	return nil
}

var nul = []byte{0}

// Digest is the CRC-32 over key NUL value NUL of each entry, in order.
func Digest(entries []*xferv1.MetaEntry) uint32 {
	var crc uint32
	for _, e := range entries {
		crc = crc32.Update(crc, crc32.IEEETable, []byte(e.GetKey()))
		crc = crc32.Update(crc, crc32.IEEETable, nul)
		crc = crc32.Update(crc, crc32.IEEETable, []byte(e.GetValue()))
		crc = crc32.Update(crc, crc32.IEEETable, nul)
	}
	return crc
}

// MalformedMessage names what was wrong with a MetaRequest body that did not
// decode: proto.Unmarshal refuses invalid UTF-8 in a string field, saying so
// in its error text only (no error value, no field name).
func MalformedMessage(decodeErr error) string {
	if strings.Contains(decodeErr.Error(), "invalid UTF-8") {
		return "malformed MetaRequest body: a key or value is not valid UTF-8"
	}
	return "malformed MetaRequest body"
}
