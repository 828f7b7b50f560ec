package tlsx

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testPKI is a throwaway CA and server certificates for 127.0.0.1, written as PEM files.
type testPKI struct {
	dir                            string
	caFile, otherCAFile            string
	certFile, keyFile, expiredFile string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir()}
	caKey, caCert := makeCA(t, "test-ca")
	_, otherCert := makeCA(t, "other-ca")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	valid := sign(t, caCert, caKey, &key.PublicKey, now.Add(-time.Hour), now.Add(time.Hour))
	expired := sign(t, caCert, caKey, &key.PublicKey, now.Add(-2*time.Hour), now.Add(-time.Hour))
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p.caFile = p.write(t, "ca.pem", "CERTIFICATE", caCert.Raw)
	p.otherCAFile = p.write(t, "other-ca.pem", "CERTIFICATE", otherCert.Raw)
	p.certFile = p.write(t, "server.pem", "CERTIFICATE", valid)
	p.expiredFile = p.write(t, "expired.pem", "CERTIFICATE", expired)
	p.keyFile = p.write(t, "server.key", "EC PRIVATE KEY", keyDER)
	return p
}

func makeCA(t *testing.T, name string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func sign(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, pub any, from, to time.Time) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "xferd.test"},
		NotBefore: from, NotAfter: to, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"xferd.test"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func (p *testPKI) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
