package tlsx

import (
	"errors"
	"flag"
	"fmt"
)

// ClientFlags are the TLS flags of the Go clients (xferload, grpcxfer), the same as py_client's.
type ClientFlags struct {
	opts   ClientOptions
	resume string
}

// RegisterClientFlags adds --tls-ca, --tls-server-name and --tls-resume to fs.
func RegisterClientFlags(fs *flag.FlagSet) *ClientFlags {
	f := &ClientFlags{}
	fs.StringVar(&f.opts.CAFile, "tls-ca", "", "speak TLS to a TLS listener, trusting the PEM certificates in `FILE` (\"\": plaintext)")
	fs.StringVar(&f.opts.ServerName, "tls-server-name", "", "with --tls-ca: the `NAME` the server's certificate must carry (default: the address's host)")
	fs.StringVar(&f.resume, "tls-resume", "on", "with --tls-ca: resume TLS sessions on later connections, `on|off`")
	return f
}

// Options are the parsed options: nil without --tls-ca. fs must have been parsed.
func (f *ClientFlags) Options(fs *flag.FlagSet) (*ClientOptions, error) {
	if f.resume != "on" && f.resume != "off" {
		return nil, fmt.Errorf("--tls-resume: want on or off, got %q", f.resume)
	}
	if f.opts.CAFile == "" {
		given := false
		fs.Visit(func(fl *flag.Flag) { given = given || fl.Name == "tls-server-name" || fl.Name == "tls-resume" })
		if given {
			return nil, errors.New("--tls-server-name and --tls-resume: only with --tls-ca")
		}
		return nil, nil
	}
	o := f.opts
	o.Resume = f.resume == "on"
	return &o, nil
}
