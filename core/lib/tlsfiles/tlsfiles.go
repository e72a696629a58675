// Package tlsfiles reads the files of a client's TLS settings (client
// certificate, key, extra CA roots) into a tls.Config, the one way every
// outgoing link does it: the bank connectors, Kafka and ClickHouse.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files holds the files of a link's TLS settings; each may be empty.
type Files struct {
	CertFile, KeyFile string // client certificate and its key (PEM), both or neither
	CAFile            string // extra roots (PEM) trusted besides the system's
}

// Set reports whether any file is named.
func (f Files) Set() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// Config returns the TLS configuration f names, reporting every problem at
// once. prefix names the settings in messages: prefix_CERT_FILE,
// prefix_KEY_FILE and prefix_CA_FILE (SLIP_KBANK, say).
func (f Files) Config(prefix string) (*tls.Config, error) {
	var errs []error
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case f.CertFile == "" && f.KeyFile == "":
	case f.CertFile == "" || f.KeyFile == "":
		errs = append(errs, fmt.Errorf("%s_CERT_FILE and %s_KEY_FILE: set both or neither", prefix, prefix))
	default:
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s_CERT_FILE, %s_KEY_FILE: %w", prefix, prefix, err))
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		pool, perr := x509.SystemCertPool()
		if perr != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s_CA_FILE: %w", prefix, err))
		case !pool.AppendCertsFromPEM(pem):
			errs = append(errs, fmt.Errorf("%s_CA_FILE %s: no PEM certificate", prefix, f.CAFile))
		default:
			cfg.RootCAs = pool
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}
