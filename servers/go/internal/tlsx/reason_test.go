package tlsx

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
)

func TestReason(t *testing.T) {
	dummy, _ := net.Pipe()
	cases := []struct {
		err  error
		want string
	}{
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake", Conn: dummy}, ReasonNotTLS},
		{tls.RecordHeaderError{Msg: "oversized record"}, ReasonProtocol}, // an alert went back: TLS, but bad
		{&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, ReasonClientAlert},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, ReasonTimeout},
		{fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), ReasonEOF},
		{io.EOF, ReasonEOF},
		{&net.OpError{Op: "local error", Err: errors.New("tls: bad record MAC")}, ReasonProtocol},
	}
	for _, c := range cases {
		if got := Reason(c.err); got != c.want {
			t.Errorf("Reason(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}

// An alert record that crypto/tls could not decrypt (OpenSSL's clients send it in plaintext under TLS 1.3)
// counts as the client's alert; its header may arrive split anywhere.
func TestAlertWatchFollowsRecords(t *testing.T) {
	records := []byte{0x16, 0x03, 0x01, 0x00, 0x03, 1, 2, 3, 0x14, 0x03, 0x03, 0x00, 0x01, 1, 0x15, 0x03, 0x03, 0x00, 0x02, 2, 48}
	for split := 1; split < len(records); split++ {
		w := &alertWatch{}
		w.scan(records[:split])
		w.scan(records[split:])
		if w.lastType != recordTypeAlert || w.left != 0 || w.have != 0 {
			t.Fatalf("split at %d: last type %d, left %d, have %d", split, w.lastType, w.left, w.have)
		}
	}
	macErr := &net.OpError{Op: "local error", Err: errors.New("tls: bad record MAC")}
	if r := (&alertWatch{lastType: recordTypeAlert}).reason(macErr); r != ReasonClientAlert {
		t.Fatalf("an undecryptable alert: %s", r)
	}
	if r := (&alertWatch{lastType: 0x17}).reason(macErr); r != ReasonProtocol {
		t.Fatalf("an undecryptable application record: %s", r)
	}
}
