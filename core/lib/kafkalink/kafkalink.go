// Package kafkalink is how every tier reaches Kafka: the SLIP_KAFKA_TLS*
// and SLIP_KAFKA_SASL_* settings, their checks, and the kafka-go dialer and
// transport they make (TLS with optional client certificate, SASL PLAIN or
// SCRAM). Readers take Dialer, writers and admin clients Transport; a nil
// *Link is plaintext without authentication, the dev stack's default.
package kafkalink

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/tlsfiles"
)

// The SASL mechanisms SLIP_KAFKA_SASL_MECHANISM takes.
const (
	Plain        = "PLAIN"
	ScramSHA256  = "SCRAM-SHA-256"
	ScramSHA512  = "SCRAM-SHA-512"
	mechanismSet = Plain + ", " + ScramSHA256 + " or " + ScramSHA512
)

// Settings are a tier's Kafka link settings.
type Settings struct {
	TLS        bool           // SLIP_KAFKA_TLS: speak TLS to the brokers
	Files      tlsfiles.Files // SLIP_KAFKA_TLS_CA_FILE, _CERT_FILE, _KEY_FILE
	ServerName string         // SLIP_KAFKA_TLS_SERVER_NAME: the name the brokers' certificates carry; empty: the host dialed
	SASL       SASL
}

// SASL is the authentication part of Settings; the dev broker reads it too,
// to create the one user it lets in.
type SASL struct {
	Mechanism      string // SLIP_KAFKA_SASL_MECHANISM: empty, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
	User, Password string // SLIP_KAFKA_SASL_USER, SLIP_KAFKA_SASL_PASSWORD
}

// Vars declares s's settings, for a tier's envflag table.
func (s *Settings) Vars() []envflag.Var {
	return append([]envflag.Var{
		envflag.Def("SLIP_KAFKA_TLS", "kafka-tls", "false", "speak TLS to the Kafka brokers", &s.TLS),
		envflag.Def("SLIP_KAFKA_TLS_CA_FILE", "kafka-tls-ca-file", "", "CA roots (PEM) trusted for the Kafka brokers besides the system's (SLIP_KAFKA_TLS)", &s.Files.CAFile),
		envflag.Def("SLIP_KAFKA_TLS_CERT_FILE", "kafka-tls-cert-file", "", "client certificate (PEM) shown to the Kafka brokers (with SLIP_KAFKA_TLS_KEY_FILE)", &s.Files.CertFile),
		envflag.Def("SLIP_KAFKA_TLS_KEY_FILE", "kafka-tls-key-file", "", "key (PEM) of SLIP_KAFKA_TLS_CERT_FILE", &s.Files.KeyFile),
		envflag.Def("SLIP_KAFKA_TLS_SERVER_NAME", "kafka-tls-server-name", "", "name the Kafka brokers' certificates must carry (empty: the host dialed)", &s.ServerName),
	}, s.SASL.Vars()...)
}

// Vars declares the SASL settings.
func (a *SASL) Vars() []envflag.Var {
	return []envflag.Var{
		envflag.Def("SLIP_KAFKA_SASL_MECHANISM", "kafka-sasl-mechanism", "", "Kafka SASL mechanism: "+mechanismSet+" (empty: no authentication)", &a.Mechanism),
		envflag.Def("SLIP_KAFKA_SASL_USER", "kafka-sasl-user", "", "Kafka SASL user", &a.User),
		envflag.Secret("SLIP_KAFKA_SASL_PASSWORD", "kafka-sasl-password", "Kafka SASL password", &a.Password),
	}
}

// Validate returns every problem of s at once, reading the TLS files.
func (s Settings) Validate() error {
	_, err := New(s)
	return err
}

// Validate returns every problem of a at once.
func (a SASL) Validate() error {
	_, err := a.mechanism()
	return err
}

// Name returns the canonical name of a's mechanism (PLAIN, SCRAM-SHA-256,
// SCRAM-SHA-512; any case is accepted), empty without SASL.
func (a SASL) Name() string { return strings.ToUpper(strings.TrimSpace(a.Mechanism)) }

// mechanism returns kafka-go's mechanism for a, nil without SASL.
func (a SASL) mechanism() (sasl.Mechanism, error) {
	var errs []error
	name := a.Name()
	if name == "" {
		if a.User != "" || a.Password != "" {
			errs = append(errs, errors.New("SLIP_KAFKA_SASL_MECHANISM: required when SLIP_KAFKA_SASL_USER or SLIP_KAFKA_SASL_PASSWORD is set ("+mechanismSet+")"))
		}
		return nil, errors.Join(errs...)
	}
	if a.User == "" {
		errs = append(errs, fmt.Errorf("SLIP_KAFKA_SASL_USER: required with SLIP_KAFKA_SASL_MECHANISM=%s", name))
	}
	if a.Password == "" {
		errs = append(errs, fmt.Errorf("SLIP_KAFKA_SASL_PASSWORD: required with SLIP_KAFKA_SASL_MECHANISM=%s", name))
	}
	var m sasl.Mechanism
	var err error
	switch name {
	case Plain:
		m = plain.Mechanism{Username: a.User, Password: a.Password}
	case ScramSHA256:
		m, err = scram.Mechanism(scram.SHA256, a.User, a.Password)
	case ScramSHA512:
		m, err = scram.Mechanism(scram.SHA512, a.User, a.Password)
	default:
		errs = append(errs, fmt.Errorf("SLIP_KAFKA_SASL_MECHANISM: %q is not %s (empty: no authentication)", a.Mechanism, mechanismSet))
	}
	if err != nil && a.User != "" && a.Password != "" {
		// SCRAM prepares both with SASLprep; the error may quote them.
		errs = append(errs, errors.New("SLIP_KAFKA_SASL_USER, SLIP_KAFKA_SASL_PASSWORD: not valid for SCRAM (SASLprep refuses a character)"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// Link is a checked Kafka link: the TLS configuration and SASL mechanism of
// a tier's settings. Its methods work on a nil *Link, a plaintext link
// without authentication.
type Link struct {
	tls       *tls.Config
	sasl      sasl.Mechanism
	transport *kafka.Transport
	desc      string
}

// New reads s's files and returns its link, or every problem of s at once.
// It returns nil, no error, for plaintext without authentication.
func New(s Settings) (*Link, error) {
	var errs []error
	l := &Link{}
	if s.TLS {
		cfg, err := s.Files.Config("SLIP_KAFKA_TLS")
		if err != nil {
			errs = append(errs, err)
		} else {
			cfg.ServerName = s.ServerName
			l.tls = cfg
		}
	} else if s.Files.Set() || s.ServerName != "" {
		errs = append(errs, errors.New("SLIP_KAFKA_TLS: must be true when SLIP_KAFKA_TLS_CA_FILE, _CERT_FILE, _KEY_FILE or _SERVER_NAME is set"))
	}
	m, err := s.SASL.mechanism()
	if err != nil {
		errs = append(errs, err)
	}
	l.sasl = m
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if l.tls == nil && l.sasl == nil {
		return nil, nil
	}
	l.desc = "plaintext"
	if l.tls != nil {
		l.desc = "TLS"
	}
	if l.sasl != nil {
		l.desc += ", " + s.SASL.Name() + " as " + s.SASL.User
	}
	l.transport = &kafka.Transport{TLS: l.tls, SASL: l.sasl, DialTimeout: dialTimeout, IdleTimeout: 30 * time.Second, MetadataTTL: 6 * time.Second}
	return l, nil
}

// dialTimeout bounds a connection's dial, TLS handshake and SASL exchange.
const dialTimeout = 10 * time.Second

// verifyTimeout bounds Verify's handshake with a broker that accepted the
// connection: a plaintext broker sent a TLS hello waits for the rest of a
// request that long (it reads the hello as a request's size) before the
// link is refused.
const verifyTimeout = 5 * time.Second

// String describes the link for logs: TLS or plaintext, and the mechanism
// and user of SASL; never the password.
func (l *Link) String() string {
	if l == nil {
		return "plaintext"
	}
	return l.desc
}

// Dialer returns a dialer over l, for kafka-go readers (ReaderConfig.Dialer)
// and connections.
func (l *Link) Dialer() *kafka.Dialer {
	d := &kafka.Dialer{Timeout: dialTimeout, DualStack: true}
	if l != nil {
		d.TLS, d.SASLMechanism = l.tls, l.sasl
	}
	return d
}

// Transport returns the transport over l, for kafka-go writers and admin
// clients (Writer.Transport, Client.Transport). Every caller of one link
// shares it, and its connection pool.
func (l *Link) Transport() kafka.RoundTripper {
	if l == nil {
		return kafka.DefaultTransport
	}
	return l.transport
}

// Verify reports the first broker of brokers that refuses the link: its
// certificate is not trusted, it does not speak what the link speaks, or it
// refuses the credentials. A broker it cannot reach at all is no error: the
// tiers wait for Kafka as they always do. A tier calls it at start, so a
// wrong setting stops it at once rather than behind retries in the log.
func (l *Link) Verify(ctx context.Context, brokers []string) error {
	d := l.Dialer()
	d.Timeout = verifyTimeout
	for _, b := range brokers {
		probe, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, "tcp", b)
		if err != nil {
			continue // not reachable now: no verdict on the link
		}
		probe.Close()
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			conn.SetDeadline(time.Now().Add(verifyTimeout))
			_, err = conn.Brokers() // a request only an authenticated client may make
			conn.Close()
		}
		if err != nil {
			return fmt.Errorf("kafka: broker %s refused the link (%s): %w; %s", b, l, err, hint(l, err))
		}
	}
	return nil
}

// hint names the settings an error of Verify points at.
func hint(l *Link, err error) string {
	var unknown x509.UnknownAuthorityError
	var name x509.HostnameError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &name):
		return "the broker's certificate is for another name: check SLIP_KAFKA_TLS_SERVER_NAME"
	case errors.As(err, &unknown), errors.As(err, &verify):
		return "the broker's certificate is not trusted: check SLIP_KAFKA_TLS_CA_FILE"
	case errors.As(err, &header):
		return "the broker does not speak TLS: check SLIP_KAFKA_TLS"
	case errors.As(err, &op) && op.Op == "remote error": // a TLS alert
		return "the broker refused the TLS handshake: does it want a client certificate (SLIP_KAFKA_TLS_CERT_FILE, SLIP_KAFKA_TLS_KEY_FILE)?"
	case l != nil && l.tls != nil && errors.Is(err, context.DeadlineExceeded):
		return "the broker did not answer the TLS handshake: does it speak TLS (SLIP_KAFKA_TLS)?"
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return "the broker refused the credentials: check SLIP_KAFKA_SASL_USER, SLIP_KAFKA_SASL_PASSWORD and SLIP_KAFKA_SASL_MECHANISM"
	case errors.Is(err, kafka.UnsupportedSASLMechanism):
		return "the broker does not take SLIP_KAFKA_SASL_MECHANISM"
	case l == nil || l.tls == nil:
		return "does the broker want TLS (SLIP_KAFKA_TLS) or SASL (SLIP_KAFKA_SASL_MECHANISM)?"
	default:
		return "check SLIP_KAFKA_TLS and SLIP_KAFKA_SASL_MECHANISM against what the broker wants"
	}
}

// Start is what a tier does with its settings at start: it makes the link
// and verifies it against brokers (Verify), for at most a dial's time per
// broker. log, when not nil, gets the link's description.
func Start(ctx context.Context, s Settings, brokers []string, log *slog.Logger) (*Link, error) {
	l, err := New(s)
	if err != nil {
		return nil, err
	}
	if log != nil {
		log.Info("kafka link", "brokers", strings.Join(brokers, ","), "link", l.String())
	}
	if err := l.Verify(ctx, brokers); err != nil {
		return nil, err
	}
	return l, nil
}
