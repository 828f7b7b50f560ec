package main

import (
	"errors"
	"fmt"
	"hash/crc32"
	"net"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
)

// download reads one file in chunk lengths from offset 0 to its end, and
// again, checking each pass's CRC-32 against the one the server sends.
type download struct {
	name     string // set by setup when the run uploads its own file
	chunk    uint64
	verify   bool
	upload   *upload // the file setup uploads when no name was given
	fileSize uint64
}

func newDownload(cfg *Config, runID string) *download {
	d := &download{name: cfg.Name, chunk: cfg.Chunk, verify: cfg.Verify}
	if d.name == "" {
		d.upload = newUpload(cfg, runID)
	}
	return d
}

// setup uploads the file to read when no --name was given.
func (d *download) setup(c *conn) (uint64, error) {
	if d.upload == nil {
		return 0, nil
	}
	s := d.upload.session(workerID{conn: 0, worker: 0}).(*uploadSession)
	s.name = fmt.Sprintf("xferload-%s-download", d.upload.runID)
	calls := uint64(0)
	for {
		_, code, err := s.call(c)
		calls++
		if err != nil {
			return calls, err
		}
		if code != "" {
			return calls, fmt.Errorf("uploading the file to download, %s: %s", s.name, code)
		}
		if s.id == 0 && s.offset >= d.upload.fileSize && calls > 1 {
			d.name = s.name
			return calls, nil
		}
	}
}

func (d *download) session(workerID) session { return &downloadSession{d: d} }

type downloadSession struct {
	d       *download
	offset  uint64
	size    uint64 // the file's, from the first answer
	crc     uint32 // the file's, from the first answer
	started bool
	running uint32 // CRC-32 of this pass so far
	buf     []byte
	gobResp xferv1.ReadResponse // --codec gob: the answer, its data buffer reused
}

func (s *downloadSession) call(c *conn) (uint64, string, error) {
	length := s.d.chunk
	if s.started {
		length = min(length, s.size-s.offset)
	}
	if length == 0 {
		length = s.d.chunk // an empty file: offset = size = 0 reads empty data
	}
	data, size, crc, code, err := s.read(c, &xferv1.ReadRequest{Name: s.d.name, Offset: s.offset, Length: uint32(length)})
	if code != "" || err != nil {
		return 0, code, err
	}
	if !s.started {
		s.size, s.crc, s.started = size, crc, true
	}
	n := uint64(len(data))
	switch {
	case size != s.size || crc != s.crc:
		s.restart()
		return n, "verify_file_changed", nil
	case s.offset > size || n != min(length, size-s.offset):
		s.restart()
		return n, "verify_length", nil
	}
	if s.d.verify {
		s.running = crc32.Update(s.running, crc32.IEEETable, data)
	}
	s.offset += n
	if s.offset < size {
		return n, "", nil
	}
	ok := !s.d.verify || s.running == s.crc
	s.restart()
	if !ok {
		return n, "verify_crc32", nil
	}
	return n, "", nil
}

// read makes one Read call in the connection's codec; code is "" on
// success, else the server's error code or verify_body.
func (s *downloadSession) read(c *conn, req *xferv1.ReadRequest) (data []byte, size uint64, crc uint32, code string, err error) {
	if c.gob != nil {
		// gob leaves a field it did not receive as it was: empty them first.
		r := &s.gobResp
		r.Data, r.Size, r.Crc32 = r.Data[:0], 0, 0
		code, err = c.gobCall("Xfer.Read", req, r)
		return r.Data, r.Size, r.Crc32, code, err
	}
	body, _ := proto.Marshal(req)
	b, errStr, err := c.call("Xfer.Read", net.Buffers{body}, &s.buf)
	if err != nil || errStr != "" {
		return nil, 0, 0, errCode(errStr), err
	}
	if data, size, crc, err = decodeRead(b); err != nil {
		return nil, 0, 0, "verify_body", nil
	}
	return data, size, crc, "", nil
}

// restart begins a new pass at offset 0.
func (s *downloadSession) restart() { s.offset, s.running = 0, 0 }

var errMalformed = errors.New("malformed ReadResponse")

// decodeRead decodes ReadResponse{data = 1, size = 2, crc32 = 3} with data
// aliasing b: proto.Unmarshal would copy every chunk once more.
func decodeRead(b []byte) (data []byte, size uint64, crc uint32, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, 0, errMalformed
		}
		b = b[n:]
		var v uint64
		switch {
		case num == 1 && typ == protowire.BytesType:
			data, n = protowire.ConsumeBytes(b)
		case num == 2 && typ == protowire.VarintType:
			size, n = protowire.ConsumeVarint(b)
		case num == 3 && typ == protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
			if v > 0xffffffff {
				return nil, 0, 0, errMalformed
			}
			crc = uint32(v)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, 0, 0, errMalformed
		}
		b = b[n:]
	}
	return data, size, crc, nil
}
