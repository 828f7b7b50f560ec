package main

import (
	"bytes"

	"google.golang.org/protobuf/proto"

	"xferbench/servers/go/gen/xferv1"
	"xferbench/servers/go/internal/content"
)

// echo sends one payload of --size bytes per call and checks it comes back.
type echo struct {
	payload []byte
	body    []byte // the encoded EchoRequest, the same for every call
	req     *xferv1.EchoRequest
}

func newEcho(cfg *Config) (*echo, error) {
	e := &echo{payload: make([]byte, cfg.Size)}
	content.Gen{Size: cfg.Size, Seed: 2}.Fill(e.payload, 0)
	var err error
	e.req = &xferv1.EchoRequest{Payload: e.payload}
	e.body, err = proto.Marshal(e.req)
	return e, err
}

func (e *echo) setup(*conn) (uint64, error) { return 0, nil }

func (e *echo) session(workerID) session { return &echoSession{e: e} }

type echoSession struct {
	e   *echo
	buf []byte
	// resp is reused; proto.Unmarshal resets it.
	resp xferv1.EchoResponse
}

func (s *echoSession) call(c *conn) (uint64, string, error) {
	if code, err := s.send(c); code != "" || err != nil {
		return 0, code, err
	}
	if !bytes.Equal(s.resp.Payload, s.e.payload) {
		return uint64(len(s.e.payload)), "verify_payload", nil
	}
	return uint64(len(s.e.payload)), "", nil
}

// send makes the call in the connection's codec; gob leaves a field it did
// not receive as it was, so the payload is emptied first (keeping its
// capacity for the next answer).
func (s *echoSession) send(c *conn) (string, error) {
	if c.gob != nil {
		s.resp.Payload = s.resp.Payload[:0]
		return c.gobCall("Xfer.Echo", s.e.req, &s.resp)
	}
	return unary(c, "Xfer.Echo", s.e.body, &s.buf, &s.resp)
}
