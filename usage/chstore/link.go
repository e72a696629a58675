package chstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/tlsfiles"
)

// TLS is the ledger link's TLS settings.
type TLS struct {
	On         bool           // SLIP_CLICKHOUSE_TLS: the native protocol over TLS (ClickHouse's tcp_port_secure)
	Files      tlsfiles.Files // SLIP_CLICKHOUSE_TLS_CA_FILE, _CERT_FILE, _KEY_FILE
	ServerName string         // SLIP_CLICKHOUSE_TLS_SERVER_NAME; empty: the host dialed
}

// Vars declares t's settings, for the usage tier's envflag table.
func (t *TLS) Vars() []envflag.Var {
	return []envflag.Var{
		envflag.Def("SLIP_CLICKHOUSE_TLS", "clickhouse-tls", "false", "speak TLS to ClickHouse (SLIP_CLICKHOUSE_ADDR is then its secure native port, 9440 by convention)", &t.On),
		envflag.Def("SLIP_CLICKHOUSE_TLS_CA_FILE", "clickhouse-tls-ca-file", "", "CA roots (PEM) trusted for ClickHouse besides the system's (SLIP_CLICKHOUSE_TLS)", &t.Files.CAFile),
		envflag.Def("SLIP_CLICKHOUSE_TLS_CERT_FILE", "clickhouse-tls-cert-file", "", "client certificate (PEM) shown to ClickHouse (with SLIP_CLICKHOUSE_TLS_KEY_FILE)", &t.Files.CertFile),
		envflag.Def("SLIP_CLICKHOUSE_TLS_KEY_FILE", "clickhouse-tls-key-file", "", "key (PEM) of SLIP_CLICKHOUSE_TLS_CERT_FILE", &t.Files.KeyFile),
		envflag.Def("SLIP_CLICKHOUSE_TLS_SERVER_NAME", "clickhouse-tls-server-name", "", "name ClickHouse's certificate must carry (empty: the host dialed)", &t.ServerName),
	}
}

// Config reads t's files and returns the TLS configuration of the link,
// nil when TLS is off, or every problem at once.
func (t TLS) Config() (*tls.Config, error) {
	if !t.On {
		if t.Files.Set() || t.ServerName != "" {
			return nil, errors.New("SLIP_CLICKHOUSE_TLS: must be true when SLIP_CLICKHOUSE_TLS_CA_FILE, _CERT_FILE, _KEY_FILE or _SERVER_NAME is set")
		}
		return nil, nil
	}
	cfg, err := t.Files.Config("SLIP_CLICKHOUSE_TLS")
	if err != nil {
		return nil, err
	}
	cfg.ServerName = t.ServerName
	return cfg, nil
}

// ClickHouse's codes for a refused login: UNKNOWN_USER, WRONG_PASSWORD,
// REQUIRED_PASSWORD (18.16), AUTHENTICATION_FAILED (later releases).
var loginRefused = map[int32]bool{192: true, 193: true, 194: true, 516: true}

// Refused reports whether err says the server refused the link itself (its
// certificate is not trusted, it does not speak TLS, or it refused the
// user and password) rather than that it is away; then it names the
// settings to check. Waiting does not cure a refusal.
func Refused(err error) (bool, string) {
	var ex *clickhouse.Exception
	var unknown x509.UnknownAuthorityError
	var name x509.HostnameError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	switch {
	case errors.As(err, &ex) && loginRefused[ex.Code]:
		return true, fmt.Sprintf("ClickHouse refused the login (code %d): check SLIP_CLICKHOUSE_USER and SLIP_CLICKHOUSE_PASSWORD", ex.Code)
	case errors.As(err, &name):
		return true, "ClickHouse's certificate is for another name: check SLIP_CLICKHOUSE_TLS_SERVER_NAME"
	case errors.As(err, &unknown), errors.As(err, &verify):
		return true, "ClickHouse's certificate is not trusted: check SLIP_CLICKHOUSE_TLS_CA_FILE"
	case errors.As(err, &header):
		return true, "ClickHouse does not speak TLS on SLIP_CLICKHOUSE_ADDR: check SLIP_CLICKHOUSE_TLS and the port"
	}
	return false, ""
}
