package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/meta"
)

// metaLoad sends one request of --entries small key/value entries per call (the same for every call, drawn
// once from a fixed seed) and checks the answer: every entry, sorted by key, and the digest.
type metaLoad struct {
	req      *xferv1.MetaRequest
	body     []byte
	want     []*xferv1.MetaEntry // the request's entries sorted by key
	wantCRC  uint32
	payloadN uint64 // key and value bytes per call
}

func newMeta(cfg *Config) (*metaLoad, error) {
	rng := rand.New(rand.NewPCG(uint64(cfg.Entries), 1))
	req := &xferv1.MetaRequest{Entries: make([]*xferv1.MetaEntry, 0, cfg.Entries)}
	seen := make(map[string]bool, cfg.Entries)
	m := &metaLoad{}
	for len(req.Entries) < cfg.Entries {
		k := randomText(rng, cfg.EntryMin, cfg.EntryMax)
		if seen[k] {
			continue // keys must be unique (PROTOCOL.md "Meta")
		}
		seen[k] = true
		v := randomText(rng, cfg.EntryMin, cfg.EntryMax)
		req.Entries = append(req.Entries, &xferv1.MetaEntry{Key: k, Value: v})
		m.payloadN += uint64(len(k) + len(v))
	}
	m.want = slices.Clone(req.Entries)
	slices.SortFunc(m.want, func(a, b *xferv1.MetaEntry) int { return strings.Compare(a.Key, b.Key) })
	m.wantCRC = meta.Digest(m.want)
	var err error
	m.req = req
	m.body, err = proto.Marshal(req)
	return m, err
}

// randomText is lo..hi letters and digits: valid UTF-8 without NUL, as the protocol requires.
func randomText(rng *rand.Rand, lo, hi int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, lo+rng.IntN(hi-lo+1))
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

func (m *metaLoad) setup(*conn) (uint64, error) { return 0, nil }

func (m *metaLoad) session(workerID) session { return &metaSession{m: m} }

type metaSession struct {
	m    *metaLoad
	buf  []byte
	resp xferv1.MetaResponse
}

func (s *metaSession) call(c *conn) (uint64, string, error) {
	if code, err := s.send(c); code != "" || err != nil {
		return 0, code, err
	}
	if code := s.m.check(&s.resp); code != "" {
		return s.m.payloadN, code, nil
	}
	return s.m.payloadN, "", nil
}

// check compares an answer with the expected one; "" when it matches.
func (m *metaLoad) check(resp *xferv1.MetaResponse) string {
	if len(resp.Entries) != len(m.want) {
		return "verify_entries"
	}
	for i, e := range resp.Entries {
		if e.GetKey() != m.want[i].Key || e.GetValue() != m.want[i].Value {
			return "verify_entries"
		}
	}
	if resp.GetDigest() != m.wantCRC {
		return "verify_digest"
	}
	return ""
}

// parseEntrySize reads --entry-size MIN-MAX (bytes per key and per value).
func parseEntrySize(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		a, b = s, s
	}
	if _, err = fmt.Sscanf(a+" "+b, "%d %d", &lo, &hi); err != nil || fmt.Sprintf("%d", lo) != a ||
		fmt.Sprintf("%d", hi) != b || lo < 1 || hi < lo || hi > meta.MaxKey {
		return 0, 0, badFlag("entry-size", "want MIN-MAX bytes with 1 <= MIN <= MAX <= %d, got %q", meta.MaxKey, s)
	}
	return lo, hi, nil
}

// send makes the call in the connection's codec; a gob answer is decoded
// into emptied fields, since gob leaves a field it did not receive as it was.
func (s *metaSession) send(c *conn) (string, error) {
	if c.gob != nil {
		s.resp.Entries, s.resp.Digest = nil, 0 // reused entries would keep fields an answer left out
		return c.gobCall("Xfer.Meta", s.m.req, &s.resp)
	}
	return unary(c, "Xfer.Meta", s.m.body, &s.buf, &s.resp)
}
