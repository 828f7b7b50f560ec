package main

import (
	"errors"
	"fmt"
	"net"
	"net/rpc"
	"strings"
)

// dialGob makes a --codec gob connection: net/rpc's own client with its
// gob codec, which multiplexes the workers' concurrent calls on nc.
func dialGob(nc net.Conn) *conn {
	c := &conn{nc: nc, gob: rpc.NewClient(nc), reader: make(chan struct{})}
	close(c.reader) // rpc.Client runs its own reader
	return c
}

// gobCall makes one net/rpc call; code is "" on success, else the server's
// error code, or verify_body for an answer whose body did not decode; err
// is a lost connection.
func (c *conn) gobCall(method string, req, resp any) (code string, err error) {
	err = c.gob.Call(method, req, resp)
	var se rpc.ServerError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &se):
		return errCode(string(se)), nil
	case strings.HasPrefix(err.Error(), "reading body "):
		return "verify_body", nil // net/rpc's text for a reply that did not decode; the connection lives on
	}
	return "", fmt.Errorf("%w: %v", errConn, err)
}
