package bankfake

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is a CA made for one test, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, all signed by the CA; and the same
// as PEM files in a temporary directory, as an operator would configure
// them (SLIP_KBANK_CERT_FILE, _KEY_FILE, _CA_FILE).
type PKI struct {
	CA         *x509.Certificate
	Pool       *x509.CertPool
	Server     tls.Certificate
	Client     tls.Certificate
	CAFile     string
	CertFile   string // the client certificate
	KeyFile    string // its key
	caKey      *ecdsa.PrivateKey
	serialNext int64
}

// NewPKI makes the CA and certificates; the files live in t.TempDir().
func NewPKI(t T) *PKI {
	t.Helper()
	p := &PKI{serialNext: 1}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p.caKey = key
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(p.serial()),
		Subject:               pkix.Name{CommonName: "bankfake test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if p.CA, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	p.Pool = x509.NewCertPool()
	p.Pool.AddCert(p.CA)
	p.Server, _ = p.leaf(t, "bank", x509.ExtKeyUsageServerAuth)
	var clientCert, clientKey []byte
	p.Client, clientCert = p.leaf(t, "merchant", x509.ExtKeyUsageClientAuth)
	clientKey = keyPEM(t, p.Client.PrivateKey.(*ecdsa.PrivateKey))
	dir := t.TempDir()
	p.CAFile = filepath.Join(dir, "ca.pem")
	p.CertFile = filepath.Join(dir, "client.pem")
	p.KeyFile = filepath.Join(dir, "client-key.pem")
	write(t, p.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	write(t, p.CertFile, clientCert)
	write(t, p.KeyFile, clientKey)
	return p
}

func (p *PKI) serial() int64 { p.serialNext++; return p.serialNext }

// leaf returns a certificate signed by the CA, and its PEM.
func (p *PKI) leaf(t T, name string, usage x509.ExtKeyUsage) (tls.Certificate, []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, keyPEM(t, key))
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM
}

func keyPEM(t T, key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func write(t T, path string, b []byte) {
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// ServerTLS is the fakes' TLS configuration: the server certificate, and a
// client certificate signed by the CA required.
func (p *PKI) ServerTLS() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.Server},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    p.Pool,
		MinVersion:   tls.VersionTLS12,
	}
}
