package clickhouse

import (
	"path/filepath"

	"github.com/slipverify/slipverify/core/envflag"
)

// Settings is the dev stack program's configuration (deploy/cmd/clickhouse).
type Settings struct {
	DataDir  string // the server's files go to DataDir/clickhouse
	TCPAddr  string
	HTTPAddr string
	Binary   string
	// CertFile and KeyFile make the native listener speak TLS only.
	CertFile, KeyFile string
	// User and Password are the one login the server takes, the same
	// settings the usage tier logs in with.
	User, Password string
	envflag.Common
}

func (c *Settings) vars() []envflag.Var {
	return []envflag.Var{
		envflag.Def("SLIP_DATA_DIR", "data-dir", ".data", "ClickHouse keeps its config, data and logs in its clickhouse/ directory", &c.DataDir),
		envflag.Def("SLIP_CLICKHOUSE_ADDR", "addr", "127.0.0.1:9000", "native protocol listener on loopback", &c.TCPAddr),
		envflag.Def("SLIP_CLICKHOUSE_HTTP_ADDR", "http-addr", "127.0.0.1:8123", "HTTP listener on loopback (/ping)", &c.HTTPAddr),
		envflag.Def("SLIP_CLICKHOUSE_BIN", "bin", DefaultBinary, "the clickhouse-server program", &c.Binary),
		envflag.Def("SLIP_CLICKHOUSE_SERVER_CERT_FILE", "server-cert-file", "", "the server's certificate (PEM): SLIP_CLICKHOUSE_ADDR then speaks TLS only (with SLIP_CLICKHOUSE_SERVER_KEY_FILE)", &c.CertFile),
		envflag.Def("SLIP_CLICKHOUSE_SERVER_KEY_FILE", "server-key-file", "", "key (PEM) of SLIP_CLICKHOUSE_SERVER_CERT_FILE", &c.KeyFile),
		envflag.Def("SLIP_CLICKHOUSE_USER", "user", "default", "the one ClickHouse user, let in from loopback", &c.User),
		envflag.Secret("SLIP_CLICKHOUSE_PASSWORD", "password", "its password (empty: none)", &c.Password),
	}
}

// Vars returns the documented settings with their defaults.
func Vars() []envflag.Var { return new(Settings).vars() }

// Load reads the configuration from flags and the environment.
func Load(args []string, getenv func(string) string) (Settings, error) {
	var c Settings
	err := envflag.Load("clickhouse", c.vars(), &c.Common, args, getenv)
	return c, err
}

// Config returns the server configuration the settings describe.
func (c Settings) Config() Config {
	dir := ""
	if c.DataDir != "" {
		dir = filepath.Join(c.DataDir, "clickhouse")
	}
	return Config{Dir: dir, TCPAddr: c.TCPAddr, HTTPAddr: c.HTTPAddr, Binary: c.Binary,
		CertFile: c.CertFile, KeyFile: c.KeyFile, User: c.User, Password: c.Password}
}
