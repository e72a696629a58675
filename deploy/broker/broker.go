// Package broker is the dev stack's Kafka-protocol broker: franz-go's kfake
// cluster on loopback, keeping its records and committed offsets under
// SLIP_DATA_DIR, with the platform's topics created at start. Production
// points every tier at a real Kafka cluster with the same SLIP_KAFKA_ADDR.
package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/core/lib/kafkalink"
)

// Config is the broker's configuration.
type Config struct {
	Addr       string // SLIP_KAFKA_ADDR: comma-separated 127.0.0.1:port, one broker each
	DataDir    string // records and offsets go to DataDir/broker
	Partitions int    // partitions of each topic
	Memory     bool   // keep nothing on disk (tests)
	// TLS: the broker's certificate and key (PEM), and the CA whose client
	// certificates it requires; all empty: plaintext.
	CertFile, KeyFile, ClientCAFile string
	// SASL, when it names a mechanism, is the one user the broker lets in,
	// the same settings the tiers log in with.
	SASL kafkalink.SASL
	envflag.Common
}

func (c *Config) vars() []envflag.Var {
	return append([]envflag.Var{
		envflag.Def("SLIP_KAFKA_ADDR", "addr", "127.0.0.1:9092", "the broker's listeners on loopback, comma-separated (one broker each)", &c.Addr),
		envflag.Def("SLIP_DATA_DIR", "data-dir", ".data", "the broker keeps records and committed offsets in its broker/ directory", &c.DataDir),
		envflag.Def("SLIP_BROKER_PARTITIONS", "partitions", "6", "partitions of each platform topic", &c.Partitions),
		envflag.Def("SLIP_BROKER_MEMORY", "memory", "false", "keep records in memory only (tests); false keeps them on disk", &c.Memory),
		envflag.Def("SLIP_BROKER_TLS_CERT_FILE", "tls-cert-file", "", "the broker's certificate (PEM): its listeners speak TLS only (with SLIP_BROKER_TLS_KEY_FILE)", &c.CertFile),
		envflag.Def("SLIP_BROKER_TLS_KEY_FILE", "tls-key-file", "", "key (PEM) of SLIP_BROKER_TLS_CERT_FILE", &c.KeyFile),
		envflag.Def("SLIP_BROKER_TLS_CLIENT_CA_FILE", "tls-client-ca-file", "", "CA (PEM) whose client certificates the broker requires (empty: none asked)", &c.ClientCAFile),
	}, c.SASL.Vars()...)
}

// Vars returns the documented settings with their defaults.
func Vars() []envflag.Var { return new(Config).vars() }

// Load reads the configuration from flags and the environment.
func Load(args []string, getenv func(string) string) (Config, error) {
	var c Config
	err := envflag.Load("broker", c.vars(), &c.Common, args, getenv)
	return c, err
}

// Ports returns the loopback ports of Addr, checking every problem.
func (c Config) Ports() ([]int, error) {
	var ports []int
	var errs []error
	for _, a := range strings.Split(c.Addr, ",") {
		host, port, err := net.SplitHostPort(strings.TrimSpace(a))
		n, perr := strconv.Atoi(port)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("SLIP_KAFKA_ADDR: %v", err))
		case host != "127.0.0.1" && host != "localhost":
			errs = append(errs, fmt.Errorf("SLIP_KAFKA_ADDR: the dev broker listens on loopback only, not %q", host))
		case perr != nil || n < 1 || n > 65535:
			errs = append(errs, fmt.Errorf("SLIP_KAFKA_ADDR: bad port %q", port))
		default:
			ports = append(ports, n)
		}
	}
	return ports, errors.Join(errs...)
}

// Validate returns every problem of c at once.
func (c Config) Validate() error {
	_, err := c.Ports()
	if c.Partitions < 1 {
		err = errors.Join(err, errors.New("SLIP_BROKER_PARTITIONS: must be at least 1"))
	}
	if !c.Memory && c.DataDir == "" {
		err = errors.Join(err, errors.New("SLIP_DATA_DIR: must not be empty"))
	}
	_, terr := c.tls()
	return errors.Join(err, terr, c.SASL.Validate())
}

// tls returns the listeners' TLS configuration, nil for plaintext.
func (c Config) tls() (*tls.Config, error) {
	switch {
	case c.CertFile == "" && c.KeyFile == "" && c.ClientCAFile == "":
		return nil, nil
	case c.CertFile == "" || c.KeyFile == "":
		return nil, errors.New("SLIP_BROKER_TLS_CERT_FILE and SLIP_BROKER_TLS_KEY_FILE: set both, or neither (and no SLIP_BROKER_TLS_CLIENT_CA_FILE)")
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("SLIP_BROKER_TLS_CERT_FILE, SLIP_BROKER_TLS_KEY_FILE: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("SLIP_BROKER_TLS_CLIENT_CA_FILE: %w", err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("SLIP_BROKER_TLS_CLIENT_CA_FILE %s: no PEM certificate", c.ClientCAFile)
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Run serves the cluster until ctx is done. ready, when not nil, is called
// with the listen addresses once the cluster accepts connections.
func Run(ctx context.Context, c Config, ready func(addrs []string)) error {
	ports, err := c.Ports()
	if err != nil {
		return err
	}
	opts := []kfake.Opt{
		kfake.Ports(ports...),
		kfake.ClusterID("slipverify-dev"),
		kfake.DefaultNumPartitions(c.Partitions),
		kfake.SeedTopics(int32(c.Partitions), api.Topics...),
	}
	if !c.Memory {
		opts = append(opts, kfake.DataDir(filepath.Join(c.DataDir, "broker")))
	}
	tc, err := c.tls()
	if err != nil {
		return err
	}
	if tc != nil {
		opts = append(opts, kfake.TLS(tc))
	}
	if err := c.SASL.Validate(); err != nil {
		return err
	}
	if name := c.SASL.Name(); name != "" {
		opts = append(opts, kfake.EnableSASL(), kfake.Superuser(name, c.SASL.User, c.SASL.Password))
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	defer cluster.Close()
	if ready != nil {
		ready(cluster.ListenAddrs())
	}
	<-ctx.Done()
	return nil
}
