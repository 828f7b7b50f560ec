package tlsx

import "net"

const (
	recordHeaderLen = 5
	recordTypeAlert = 21
)

// alertWatch notes the type of each TLS record the client sends during the handshake. A client that
// refuses our certificate under TLS 1.3 may send its alert in plaintext where crypto/tls expects an
// encrypted record (OpenSSL's clients do), which crypto/tls reports as a bad record MAC: the record's type
// is what tells it was the client's alert.
type alertWatch struct {
	net.Conn
	hdr      [recordHeaderLen]byte
	have     int  // bytes of the current record header read so far
	left     int  // bytes of the current record's body still to come
	lastType byte // the type of the last record whose header arrived
	off      bool // set once the handshake is over: nothing left to watch
}

func (w *alertWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if !w.off {
		w.scan(p[:n])
	}
	return n, err
}

// scan follows the record boundaries through the bytes read.
func (w *alertWatch) scan(b []byte) {
	for len(b) > 0 {
		if w.left > 0 {
			k := min(w.left, len(b))
			w.left, b = w.left-k, b[k:]
			continue
		}
		k := copy(w.hdr[w.have:], b)
		w.have, b = w.have+k, b[k:]
		if w.have == recordHeaderLen {
			w.lastType, w.left, w.have = w.hdr[0], int(w.hdr[3])<<8|int(w.hdr[4]), 0
		}
	}
}

// reason is Reason(err), with an undecryptable record that was an alert counted as the client's alert.
func (w *alertWatch) reason(err error) string {
	r := Reason(err)
	if r == ReasonProtocol && w.lastType == recordTypeAlert {
		return ReasonClientAlert
	}
	return r
}
