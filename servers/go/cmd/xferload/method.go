package main

import (
	"fmt"
	"net"

	"google.golang.org/protobuf/proto"
)

// A method is one kind of load. Adding one (say, meta) is a type with these
// two functions and a case in newMethod.
type method interface {
	// setup runs once on the first connection before the run starts (the
	// download of a file it uploads itself); it returns the calls it made.
	setup(c *conn) (calls uint64, err error)
	// session returns the state of one worker: its calls follow each other,
	// one in flight at a time, and --inflight workers share a connection.
	session(w workerID) session
}

// A session makes one worker's calls.
type session interface {
	// call makes the worker's next call on c and checks the answer. It
	// returns the payload bytes the call moved and code: "" when the call
	// succeeded and its answer passed every check, else the server's error
	// code or verify_<what>. err is a lost connection (the call has no answer).
	call(c *conn) (bytes uint64, code string, err error)
}

type workerID struct{ conn, worker int }

// unary makes one call whose request body is encoded once and reused, and decodes its answer into resp.
// code is "" when the call succeeded, else the server's error code or verify_body; err is a lost connection.
func unary(c *conn, method string, body []byte, buf *[]byte, resp proto.Message) (code string, err error) {
	b, errStr, err := c.call(method, net.Buffers{body}, buf)
	switch {
	case err != nil:
		return "", err
	case errStr != "":
		return errCode(errStr), nil
	case proto.Unmarshal(b, resp) != nil:
		return "verify_body", nil
	}
	return "", nil
}

// newMethod builds the method the configuration names; runID makes its
// names unique to this run.
func newMethod(cfg *Config, runID string) (method, error) {
	switch cfg.Method {
	case "upload":
		return newUpload(cfg, runID), nil
	case "download":
		return newDownload(cfg, runID), nil
	case "echo":
		return newEcho(cfg)
	case "meta":
		return newMeta(cfg)
	}
	return nil, fmt.Errorf("unknown method %q", cfg.Method)
}
