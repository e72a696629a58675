// Package clickhouse starts and stops a ClickHouse server of its own on
// loopback, for the dev stack and for tests: Debian's clickhouse-server
// (18.16) with a config, users.xml, data and logs under one directory and
// ports of its choosing; or a cluster of them (cluster.go): replicas of one
// shard coordinated by a ZooKeeper of its own (Debian's zookeeper package).
// Production points the usage tier at a ClickHouse server or cluster of its
// own instead.
package clickhouse

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"text/template"
	"time"
)

// DefaultBinary is where Debian's clickhouse-server package installs the
// server.
const DefaultBinary = "/usr/sbin/clickhouse-server"

// Config says where a server keeps its files and where it listens.
type Config struct {
	Dir      string // config.xml, users.xml, data/, tmp/, log/
	TCPAddr  string // native protocol, 127.0.0.1:port
	HTTPAddr string // HTTP interface (/ping), 127.0.0.1:port
	Binary   string // the server program; empty means DefaultBinary
	// CertFile and KeyFile (PEM), when set, make the native listener
	// TCPAddr speak TLS only (ClickHouse's tcp_port_secure).
	CertFile, KeyFile string
	// User is the one user the server lets in, from loopback, with
	// Password (empty: none); empty User means "default".
	User, Password string
	Log            io.Writer
	// Ready bounds the wait for /ping after start; zero means a minute
	// (a first start creates its system tables).
	Ready time.Duration
	// Replica, when set, makes the server a replica of a cluster.
	Replica *Replica
}

// Server is a clickhouse-server process, running until Stop or Kill; Restart
// starts it again with its data.
type Server struct {
	cfg  Config
	proc atomic.Pointer[process] // replaced by each start; read by Supervise
}

// process is one run of the server program.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // the process's exit, valid once done is closed
}

// Validate returns every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("clickhouse: the data directory must not be empty"))
	}
	for _, a := range []struct{ name, addr string }{{"SLIP_CLICKHOUSE_ADDR", c.TCPAddr}, {"SLIP_CLICKHOUSE_HTTP_ADDR", c.HTTPAddr}} {
		host, _, err := net.SplitHostPort(a.addr)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %v", a.name, err))
		case host != "127.0.0.1" && host != "localhost":
			errs = append(errs, fmt.Errorf("%s: the dev ClickHouse listens on loopback only, not %q", a.name, host))
		}
	}
	if c.TCPAddr != "" && c.TCPAddr == c.HTTPAddr {
		errs = append(errs, errors.New("SLIP_CLICKHOUSE_ADDR and SLIP_CLICKHOUSE_HTTP_ADDR must differ"))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("SLIP_CLICKHOUSE_SERVER_CERT_FILE and SLIP_CLICKHOUSE_SERVER_KEY_FILE: set both or neither"))
	} else if c.CertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("SLIP_CLICKHOUSE_SERVER_CERT_FILE, SLIP_CLICKHOUSE_SERVER_KEY_FILE: %w", err))
		}
	}
	if c.Replica != nil {
		if err := c.Replica.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if !userName.MatchString(c.user()) {
		errs = append(errs, fmt.Errorf("SLIP_CLICKHOUSE_USER: %q is not a plain name (letters, digits, _)", c.User))
	}
	return errors.Join(errs...)
}

var userName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (c Config) user() string {
	if c.User == "" {
		return "default"
	}
	return c.User
}

// Secure reports whether the native listener speaks TLS.
func (c Config) Secure() bool { return c.CertFile != "" }

func (c Config) binary() string {
	if c.Binary != "" {
		return c.Binary
	}
	return DefaultBinary
}

// Installed reports whether the server program of c exists.
func (c Config) Installed() bool {
	fi, err := os.Stat(c.binary())
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Start writes the configuration under c.Dir (keeping any data there),
// starts the server and waits until /ping answers. The server dies with the
// calling process (SIGKILL on its death), so a crashed test or dev stack
// leaves no server behind.
func Start(ctx context.Context, c Config) (*Server, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Installed() {
		return nil, fmt.Errorf("clickhouse: %s is not installed (apt-get install clickhouse-server clickhouse-client)", c.binary())
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, err
	}
	if err := writeConfig(dir, c); err != nil {
		return nil, err
	}
	s := &Server{cfg: c}
	if err := s.start(ctx, dir); err != nil {
		return nil, err
	}
	return s, nil
}

// Restart starts the server again on the same directory and ports after a
// Stop or Kill, keeping its data.
func (s *Server) Restart(ctx context.Context) error {
	dir, err := filepath.Abs(s.cfg.Dir)
	if err != nil {
		return err
	}
	return s.start(ctx, dir)
}

func (s *Server) start(ctx context.Context, dir string) error {
	c := s.cfg
	cmd := exec.Command(c.binary(), "--config-file="+filepath.Join(dir, "config.xml"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("clickhouse: start: %w", err)
	}
	p := watch(cmd)
	s.proc.Store(p)
	wait := c.Ready
	if wait == 0 {
		wait = time.Minute
	}
	if err := s.waitPing(ctx, wait); err != nil {
		s.Kill()
		return fmt.Errorf("%w (server log: %s)", err, filepath.Join(dir, "log"))
	}
	return nil
}

// waitPing polls /ping until it answers "Ok.", the process exits, or wait
// passes.
func (s *Server) waitPing(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	url := "http://" + s.cfg.HTTPAddr + "/ping"
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if Ping(ctx, url) == nil {
			return nil
		}
		select {
		case <-s.proc.Load().done:
			return fmt.Errorf("clickhouse: server exited before it answered /ping: %v", s.proc.Load().err)
		case <-ctx.Done():
			return fmt.Errorf("clickhouse: no answer on %s within %s", url, wait)
		case <-tick.C:
		}
	}
}

// Ping asks a server's /ping URL once, on a connection of its own.
func Ping(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// An idle keep-alive connection would hold the server's shutdown for
	// its keep-alive timeout.
	req.Close = true
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64))
	if res.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "Ok." {
		return fmt.Errorf("clickhouse: /ping answered %d %q", res.StatusCode, body)
	}
	return nil
}

// Addr is the native protocol address; HTTPAddr the HTTP interface's.
func (s *Server) Addr() string     { return s.cfg.TCPAddr }
func (s *Server) HTTPAddr() string { return s.cfg.HTTPAddr }

// Done is closed when the server process has exited.
func (s *Server) Done() <-chan struct{} { return s.proc.Load().done }

// Stop sends SIGTERM and waits for the server to exit (it flushes and
// stops in about 2 s); after timeout it kills it.
func (s *Server) Stop(timeout time.Duration) error { return s.proc.Load().stop("clickhouse", timeout) }

// Kill stops the server with SIGKILL and waits for it.
func (s *Server) Kill() { s.proc.Load().kill() }

// Pid is the server process's id.
func (s *Server) Pid() int { return s.proc.Load().cmd.Process.Pid }

// watch returns the process of a started cmd, reaped when it exits.
func watch(cmd *exec.Cmd) *process {
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p
}

// stop sends SIGTERM and waits for the exit; after timeout it kills.
func (p *process) stop(name string, timeout time.Duration) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("%s: did not stop within %s of SIGTERM; killed", name, timeout)
	}
}

// kill sends SIGKILL and waits for the exit.
func (p *process) kill() {
	p.cmd.Process.Kill()
	<-p.done
}

var configXML = template.Must(template.New("config").Funcs(template.FuncMap{"xml": xmlText}).Parse(`<?xml version="1.0"?>
<!-- Written at every start from deploy/clickhouse; edits are overwritten. -->
<yandex>
    <logger>
        <level>warning</level>
        <log>{{.Dir}}/log/clickhouse-server.log</log>
        <errorlog>{{.Dir}}/log/clickhouse-server.err.log</errorlog>
        <size>10M</size>
        <count>2</count>
    </logger>
    <listen_host>{{.Host}}</listen_host>
{{- if .CertFile}}
    <tcp_port_secure>{{.TCPPort}}</tcp_port_secure>
    <openSSL>
        <server>
            <certificateFile>{{.CertFile}}</certificateFile>
            <privateKeyFile>{{.KeyFile}}</privateKeyFile>
            <verificationMode>none</verificationMode>
            <loadDefaultCAFile>false</loadDefaultCAFile>
            <cacheSessions>true</cacheSessions>
            <disableProtocols>sslv2,sslv3,tlsv1,tlsv1_1</disableProtocols>
            <preferServerCiphers>true</preferServerCiphers>
        </server>
    </openSSL>
{{- else}}
    <tcp_port>{{.TCPPort}}</tcp_port>
{{- end}}
    <http_port>{{.HTTPPort}}</http_port>
    <path>{{.Dir}}/data/</path>
    <tmp_path>{{.Dir}}/tmp/</tmp_path>
    <user_files_path>{{.Dir}}/user_files/</user_files_path>
    <format_schema_path>{{.Dir}}/format_schemas/</format_schema_path>
    <users_config>{{.Dir}}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <max_connections>256</max_connections>
    <max_concurrent_queries>64</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <builtin_dictionaries_reload_interval>3600</builtin_dictionaries_reload_interval>
{{- with .Replica}}
    <!-- A replica of cluster {{.Name}}: one shard, every replica listed. -->
    <interserver_http_host>{{$.Host}}</interserver_http_host>
    <interserver_http_port>{{.InterserverPort}}</interserver_http_port>
    <zookeeper>
        <node><host>{{.ZooKeeperHost}}</host><port>{{.ZooKeeperPort}}</port></node>
        <session_timeout_ms>10000</session_timeout_ms>
    </zookeeper>
    <macros>
        <shard>{{.Shard}}</shard>
        <replica>{{.ReplicaName}}</replica>
    </macros>
    <remote_servers>
        <{{.Name}}>
            <shard>
                <internal_replication>true</internal_replication>
{{- range .Replicas}}
                <replica><host>{{.Host}}</host><port>{{.Port}}</port><user>{{xml $.User}}</user><password>{{xml $.Password}}</password></replica>
{{- end}}
            </shard>
        </{{.Name}}>
    </remote_servers>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
    <!-- A replica whose ZooKeeper session ended checks every second
         (not every minute) whether it can take writes again. -->
    <merge_tree><zookeeper_session_expiration_check_period>1</zookeeper_session_expiration_check_period></merge_tree>
{{- end}}
</yandex>
`))

// usersXML lets one user in from loopback only: the server listens on
// loopback and is the dev stack's own. Without a password its sha256 is
// that of the empty string, which lets it in without one.
var usersXML = template.Must(template.New("users").Parse(`<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
            <load_balancing>random</load_balancing>
        </default>
    </profiles>
    <users>
        <{{.User}}>
            <password_sha256_hex>{{.PasswordSHA256}}</password_sha256_hex>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </{{.User}}>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`))

// xmlText escapes s for an XML text node.
func xmlText(s string) (string, error) {
	var b strings.Builder
	err := xml.EscapeText(&b, []byte(s))
	return b.String(), err
}

func writeConfig(dir string, c Config) error {
	for _, sub := range []string{"data", "tmp", "user_files", "format_schemas", "log"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	host, tcpPort, _ := net.SplitHostPort(c.TCPAddr) // checked by Validate
	_, httpPort, _ := net.SplitHostPort(c.HTTPAddr)
	if host == "localhost" {
		host = "127.0.0.1"
	}
	cert, key := c.CertFile, c.KeyFile
	for _, f := range []*string{&cert, &key} {
		if *f != "" {
			abs, err := filepath.Abs(*f)
			if err != nil {
				return err
			}
			*f = abs
		}
	}
	var b, u strings.Builder
	var replica *replicaXML
	if c.Replica != nil {
		replica = c.Replica.xml()
	}
	err := configXML.Execute(&b, map[string]any{"Dir": dir, "Host": host, "TCPPort": tcpPort, "HTTPPort": httpPort, "CertFile": cert, "KeyFile": key,
		"User": c.user(), "Password": c.Password, "Replica": replica})
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(c.Password))
	if err := usersXML.Execute(&u, map[string]string{"User": c.user(), "PasswordSHA256": hex.EncodeToString(sum[:])}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.xml"), []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "users.xml"), []byte(u.String()), 0o600)
}
