package kafkalink_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/lib/tlsfiles"
	"github.com/slipverify/slipverify/deploy/broker"
)

// TestSettings: every wrong combination of settings is refused at start,
// each naming its setting, and no message shows the password.
func TestSettings(t *testing.T) {
	pki := bankfake.NewPKI(t)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	const password = "s3cret-password"
	tlsOn := func(f tlsfiles.Files) kafkalink.Settings { return kafkalink.Settings{TLS: true, Files: f} }
	sasl := func(m, u, p string) kafkalink.Settings {
		return kafkalink.Settings{SASL: kafkalink.SASL{Mechanism: m, User: u, Password: p}}
	}
	for _, c := range []struct {
		name string
		s    kafkalink.Settings
		want []string // each in the error; none: valid
		link string   // the link's description when valid
	}{
		{"nothing", kafkalink.Settings{}, nil, "plaintext"},
		{"TLS, system roots", kafkalink.Settings{TLS: true}, nil, "TLS"},
		{"TLS with every file", tlsOn(tlsfiles.Files{CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile}), nil, "TLS"},
		{"SCRAM, any case", sasl("scram-sha-512", "slip", password), nil, "plaintext, SCRAM-SHA-512 as slip"},
		{"PLAIN", sasl("PLAIN", "slip", password), nil, "plaintext, PLAIN as slip"},
		{"unknown mechanism", sasl("GSSAPI", "slip", password), []string{`SLIP_KAFKA_SASL_MECHANISM: "GSSAPI" is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`}, ""},
		{"user without password", sasl("SCRAM-SHA-256", "slip", ""), []string{"SLIP_KAFKA_SASL_PASSWORD: required with SLIP_KAFKA_SASL_MECHANISM=SCRAM-SHA-256"}, ""},
		{"password without user", sasl("PLAIN", "", password), []string{"SLIP_KAFKA_SASL_USER: required"}, ""},
		{"user without mechanism", sasl("", "slip", password), []string{"SLIP_KAFKA_SASL_MECHANISM: required when SLIP_KAFKA_SASL_USER"}, ""},
		{"cert without key", tlsOn(tlsfiles.Files{CertFile: pki.CertFile}), []string{"SLIP_KAFKA_TLS_CERT_FILE and SLIP_KAFKA_TLS_KEY_FILE: set both or neither"}, ""},
		{"unreadable CA", tlsOn(tlsfiles.Files{CAFile: "/nonexistent/ca.pem"}), []string{"SLIP_KAFKA_TLS_CA_FILE: open /nonexistent/ca.pem"}, ""},
		{"CA that is no certificate", tlsOn(tlsfiles.Files{CAFile: garbage}), []string{"SLIP_KAFKA_TLS_CA_FILE " + garbage + ": no PEM certificate"}, ""},
		{"files without TLS", kafkalink.Settings{Files: tlsfiles.Files{CAFile: pki.CAFile}}, []string{"SLIP_KAFKA_TLS: must be true"}, ""},
		{"every problem at once", kafkalink.Settings{TLS: true, Files: tlsfiles.Files{KeyFile: pki.KeyFile, CAFile: garbage}, SASL: kafkalink.SASL{Mechanism: "SCRAM", Password: password}},
			[]string{"SLIP_KAFKA_TLS_CERT_FILE and", "SLIP_KAFKA_TLS_CA_FILE", "SLIP_KAFKA_SASL_MECHANISM", "SLIP_KAFKA_SASL_USER"}, ""},
	} {
		l, err := kafkalink.New(c.s)
		if len(c.want) == 0 {
			if err != nil || l.String() != c.link {
				t.Errorf("%s: %v, link %q, want %q", c.name, err, l, c.link)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

// secureBroker starts the dev broker speaking TLS only, with one SASL user
// of mechanism (none: anyone), asking for client certificates or not, and
// returns its address and the CA that signed its certificate (and a client
// certificate).
func secureBroker(t *testing.T, mechanism string, clientCerts bool) (string, *bankfake.PKI) {
	t.Helper()
	pki := bankfake.NewPKI(t)
	var sasl kafkalink.SASL
	if mechanism != "" {
		sasl = kafkalink.SASL{Mechanism: mechanism, User: "slip", Password: "broker-password"}
	}
	clientCA := ""
	if clientCerts {
		clientCA = pki.CAFile
	}
	return broker.StartTestTLS(t, pki.Server, clientCA, sasl), pki
}

// TestThroughSecureBroker: over TLS with each SASL mechanism, a writer,
// a group reader and an admin client of the tiers move and see records on
// the real broker.
func TestThroughSecureBroker(t *testing.T) {
	for _, mech := range []string{kafkalink.Plain, kafkalink.ScramSHA256, kafkalink.ScramSHA512} {
		t.Run(mech, func(t *testing.T) {
			addr, pki := secureBroker(t, mech, true)
			link, err := kafkalink.Start(context.Background(), kafkalink.Settings{TLS: true,
				Files: tlsfiles.Files{CAFile: pki.CAFile, CertFile: pki.CertFile, KeyFile: pki.KeyFile},
				SASL:  kafkalink.SASL{Mechanism: mech, User: "slip", Password: "broker-password"}}, []string{addr}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w := stream.NewWriter([]string{addr}, link)
			defer w.Close()
			if err := w.WriteMessages(ctx, kafka.Message{Topic: "slip.jobs", Key: []byte("k"), Value: []byte("over " + mech)}); err != nil {
				t.Fatal(err)
			}
			r := stream.NewReader([]string{addr}, link, "slip.jobs", "secure-"+mech)
			defer r.Close()
			m, err := r.FetchMessage(ctx)
			if err != nil || string(m.Value) != "over "+mech {
				t.Fatalf("read %q, %v", m.Value, err)
			}
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatal(err)
			}
			admin := &kafka.Client{Addr: kafka.TCP(addr), Transport: link.Transport()}
			md, err := admin.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{"slip.jobs"}})
			if err != nil || len(md.Topics) != 1 || len(md.Topics[0].Partitions) != 3 {
				t.Fatalf("metadata: %+v, %v", md, err)
			}
		})
	}
}

// TestRefusedAtStart: a link the broker refuses stops a tier at start with
// the setting to check; a broker that is away does not.
func TestRefusedAtStart(t *testing.T) {
	addr, pki := secureBroker(t, kafkalink.ScramSHA512, false)
	good := kafkalink.Settings{TLS: true, Files: tlsfiles.Files{CAFile: pki.CAFile},
		SASL: kafkalink.SASL{Mechanism: kafkalink.ScramSHA512, User: "slip", Password: "broker-password"}}
	plainAddr := broker.StartTest(t, 1)
	other := bankfake.NewPKI(t)
	for _, c := range []struct {
		name   string
		addr   string
		change func(*kafkalink.Settings)
		want   string // in the error; empty: no error
	}{
		{"right", addr, func(*kafkalink.Settings) {}, ""},
		{"wrong password", addr, func(s *kafkalink.Settings) { s.SASL.Password = "wrong-password" }, "check SLIP_KAFKA_SASL_USER, SLIP_KAFKA_SASL_PASSWORD"},
		{"unknown user", addr, func(s *kafkalink.Settings) { s.SASL.User = "nobody" }, "refused the credentials"},
		{"other mechanism", addr, func(s *kafkalink.Settings) { s.SASL.Mechanism = kafkalink.ScramSHA256 }, "refused the credentials"},
		{"untrusted CA", addr, func(s *kafkalink.Settings) { s.Files.CAFile = other.CAFile }, "not trusted: check SLIP_KAFKA_TLS_CA_FILE"},
		{"wrong server name", addr, func(s *kafkalink.Settings) { s.ServerName = "kafka.example" }, "SLIP_KAFKA_TLS_SERVER_NAME"},
		{"no TLS", addr, func(s *kafkalink.Settings) { s.TLS, s.Files = false, tlsfiles.Files{} }, "SLIP_KAFKA_TLS"},
		{"no SASL", addr, func(s *kafkalink.Settings) { s.SASL = kafkalink.SASL{} }, "SLIP_KAFKA_SASL_MECHANISM"},
		{"TLS to a plaintext broker", plainAddr, func(*kafkalink.Settings) {}, "SLIP_KAFKA_TLS"},
		{"broker away", testnet.FreeAddr(t), func(*kafkalink.Settings) {}, ""},
	} {
		s := good
		c.change(&s)
		_, err := kafkalink.Start(context.Background(), s, []string{c.addr}, nil)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		case err != nil && s.SASL.Password != "" && strings.Contains(err.Error(), s.SASL.Password):
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

// TestClientCertificateRequired: a broker that asks for a client
// certificate refuses a link without one, and takes one with it.
func TestClientCertificateRequired(t *testing.T) {
	addr, pki := secureBroker(t, "", true)
	s := kafkalink.Settings{TLS: true, Files: tlsfiles.Files{CAFile: pki.CAFile}}
	if _, err := kafkalink.Start(context.Background(), s, []string{addr}, nil); err == nil || !strings.Contains(err.Error(), "SLIP_KAFKA_TLS_CERT_FILE") {
		t.Errorf("without a client certificate: %v", err)
	}
	s.Files.CertFile, s.Files.KeyFile = pki.CertFile, pki.KeyFile
	if _, err := kafkalink.Start(context.Background(), s, []string{addr}, nil); err != nil {
		t.Errorf("with a client certificate: %v", err)
	}
}
