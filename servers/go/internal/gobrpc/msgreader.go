package gobrpc

import (
	"bufio"
	"encoding/binary"

	"xferbench/servers/go/internal/errs"
)

// MaxTypeDefs bounds the type definitions one connection may send. The
// decoder keeps every one for the connection's life; the Xfer service needs
// about a dozen (rpc.Request, each request type, MetaEntry).
const MaxTypeDefs = 64

// maxCountBytes is the most bytes a gob unsigned count takes after its
// first byte (a uint64).
const maxCountBytes = 8

// msgReader is what the gob decoder reads from: it follows gob's framing
// (every message is preceded by its byte count) and refuses a message
// larger than max, or a type definition beyond MaxTypeDefs, as soon as its
// prefix arrives, before the decoder allocates for it. It implements
// io.ByteReader so the decoder adds no buffering of its own and every byte
// it takes is counted here. Its first error sticks: after it the stream is
// out of step and nothing more may be read.
type msgReader struct {
	br       *bufio.Reader
	max      uint64
	left     uint64 // bytes of the current message (prefix included) not yet read
	typeDefs int
	err      error
}

func (r *msgReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		if r.err = r.next(); r.err != nil {
			return 0, r.err
		}
	}
	if uint64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.br.Read(p)
	r.left -= uint64(n)
	r.err = err
	return n, err
}

func (r *msgReader) ReadByte() (byte, error) {
	var b [1]byte
	if _, err := r.Read(b[:]); err != nil {
		return 0, err
	}
	return b[0], nil
}

// next reads (without consuming) the count that starts a message, and the
// type id after it, and checks both.
func (r *msgReader) next() error {
	prefix, n, err := r.peekUint(0)
	if err != nil {
		return err
	}
	if n > r.max {
		return errs.New(errs.ResourceExhausted, "gob message of %d bytes exceeds limit %d (--max-frame)", n, r.max)
	}
	if n > 0 {
		if err := r.countTypeDef(prefix, n); err != nil {
			return err
		}
	}
	r.left = uint64(prefix) + n
	return nil
}

// countTypeDef counts the message as a type definition when its type id,
// the first value of the message, is negative (gob's marker for one).
func (r *msgReader) countTypeDef(prefix int, n uint64) error {
	first, err := r.br.Peek(prefix + 1)
	if err != nil {
		return err
	}
	idLen := 1
	if b := first[prefix]; b >= 0x80 {
		idLen += int(-int8(b))
	}
	if uint64(idLen) > n || idLen > 1+maxCountBytes {
		return nil // malformed id: the decoder reports it
	}
	id, err := r.br.Peek(prefix + idLen)
	if err != nil {
		return err
	}
	// gob ints are uints with the sign in the lowest bit, which is the
	// lowest bit of the encoding's last byte.
	if id[prefix+idLen-1]&1 == 0 {
		return nil
	}
	r.typeDefs++
	if r.typeDefs > MaxTypeDefs {
		return errs.New(errs.ResourceExhausted, "more than %d gob type definitions on one connection", MaxTypeDefs)
	}
	return nil
}

// peekUint decodes a gob unsigned integer at offset off of the unread
// input: one byte below 0x80, else the negated byte count then big-endian
// bytes. It returns the bytes it occupies.
func (r *msgReader) peekUint(off int) (int, uint64, error) {
	b, err := r.br.Peek(off + 1)
	if err != nil {
		return 0, 0, err
	}
	if b[off] < 0x80 {
		return 1, uint64(b[off]), nil
	}
	k := int(-int8(b[off]))
	if k < 1 || k > maxCountBytes {
		return 0, 0, errs.New(errs.InvalidArgument, "gob message count prefix byte %#x is malformed", b[off])
	}
	if b, err = r.br.Peek(off + 1 + k); err != nil {
		return 0, 0, err
	}
	var full [8]byte
	copy(full[8-k:], b[off+1:])
	return 1 + k, binary.BigEndian.Uint64(full[:]), nil
}
