package clickhouse

import (
	"path/filepath"
	"strings"

	"github.com/slipverify/slipverify/core/lib/envflag"
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
	// Cluster, when set, runs a cluster of that name instead of one
	// server: a ZooKeeper at ZooKeeper and one replica per address of
	// TCPAddr (and of HTTPAddr and InterserverAddr).
	Cluster         string
	InterserverAddr string
	ZooKeeper       string
	envflag.Common
}

func (c *Settings) vars() []envflag.Var {
	return []envflag.Var{
		envflag.Def("SLIP_DATA_DIR", "data-dir", ".data", "ClickHouse keeps its config, data and logs in its clickhouse/ directory", &c.DataDir),
		envflag.Def("SLIP_CLICKHOUSE_ADDR", "addr", "127.0.0.1:9000", "native protocol listener on loopback (with SLIP_CLICKHOUSE_CLUSTER: one per replica, comma-separated)", &c.TCPAddr),
		envflag.Def("SLIP_CLICKHOUSE_HTTP_ADDR", "http-addr", "127.0.0.1:8123", "HTTP listener on loopback, /ping (with SLIP_CLICKHOUSE_CLUSTER: one per replica, comma-separated)", &c.HTTPAddr),
		envflag.Def("SLIP_CLICKHOUSE_CLUSTER", "cluster", "", "run a cluster of this name instead of one server: a ZooKeeper and one replica per SLIP_CLICKHOUSE_ADDR, each started again when it dies", &c.Cluster),
		envflag.Def("SLIP_CLICKHOUSE_INTERSERVER_ADDR", "interserver-addr", "127.0.0.1:9009,127.0.0.1:9010", "with SLIP_CLICKHOUSE_CLUSTER: each replica's listener for replication on loopback, comma-separated", &c.InterserverAddr),
		envflag.Def("SLIP_ZOOKEEPER_ADDR", "zookeeper-addr", "127.0.0.1:2181", "with SLIP_CLICKHOUSE_CLUSTER: ZooKeeper's client listener on loopback", &c.ZooKeeper),
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

// ClusterConfig returns the cluster the settings describe (with Cluster
// set), its files under DataDir/clickhouse-cluster.
func (c Settings) ClusterConfig() ClusterConfig {
	dir := ""
	if c.DataDir != "" {
		dir = filepath.Join(c.DataDir, "clickhouse-cluster")
	}
	return ClusterConfig{Dir: dir, Name: c.Cluster, ZooKeeper: c.ZooKeeper, TCPAddrs: list(c.TCPAddr), HTTPAddrs: list(c.HTTPAddr),
		InterserverAddrs: list(c.InterserverAddr), Binary: c.Binary, User: c.User, Password: c.Password}
}

func list(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
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
