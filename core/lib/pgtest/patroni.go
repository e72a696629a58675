package pgtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// The programs of Debian's patroni and etcd-server packages.
const (
	PatroniBin    = "/usr/bin/patroni"
	PatroniCtlBin = "/usr/bin/patronictl"
	EtcdBin       = "/usr/bin/etcd"
)

// Patroni's timing: the leader's lock lasts TTL seconds unless renewed;
// each member acts every LoopWait seconds; a DCS or PostgreSQL operation is
// retried for RetryTimeout seconds before the leader demotes itself.
// Patroni's documentation gives their minimums (20, 1 and 3 s; later
// versions raise a lower value to it, 3.0.2 takes it as it is) and the
// rule LoopWait + 2×RetryTimeout ≤ TTL. A crashed primary is replaced
// once its lock expires: about TTL seconds.
const (
	TTL          = 20
	LoopWait     = 1
	RetryTimeout = 5
)

// scope is the cluster's name in the DCS (patronictl's argument).
const scope = "slip"

// Patroni is a PostgreSQL cluster run by Patroni: a one-member etcd as its
// DCS, and members that each run Patroni and the PostgreSQL it manages,
// the first a primary, the others its standbys. Synchronous replication is
// strict (synchronous_mode and synchronous_mode_strict): a commit returns
// once a standby has it, so a failover (Patroni promotes only the
// synchronous standby) loses no acknowledged commit, and with no standby a
// commit waits. A former primary rejoins as a standby, rewound with
// pg_rewind (wal_log_hints is on).
type Patroni struct {
	Members []*Member
	etcd    *testnet.Proc
	dcs     string // etcd's client address, host:port
	dir     string
	attr    *syscall.SysProcAttr // the server's user
}

// Member is one member of a Patroni cluster.
type Member struct {
	Name string
	// Addr is its PostgreSQL's listener, host:port; API, Patroni's REST API.
	Addr, API string
	*testnet.Proc
	data string // PostgreSQL's data directory
	conf string // Patroni's configuration file
}

// StartPatroni starts etcd and n members in temporary directories, and
// returns once the first is the primary and the others stream from it,
// one of them synchronous. Everything stops when tb ends. Without the
// packages the test is skipped, except in CI.
func StartPatroni(tb testing.TB, n int) *Patroni {
	tb.Helper()
	for _, bin := range []string{PatroniBin, EtcdBin, filepath.Join(BinDir, "initdb")} {
		if _, err := os.Stat(bin); err != nil {
			if os.Getenv("CI") != "" {
				tb.Fatalf("%v; CI installs patroni, etcd-server and postgresql-15", err)
			}
			tb.Skipf("%v: apt-get install patroni etcd-server postgresql-15", err)
		}
	}
	// Not tb.TempDir: its parents are closed to any user but this one.
	dir, err := os.MkdirTemp("", "patroni-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	p := &Patroni{dir: dir, dcs: testnet.FreeAddr(tb)}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("running as root, PostgreSQL needs a user of its own: %v (the postgresql-15 package creates postgres)", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		p.attr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	peer := testnet.FreeAddr(tb)
	p.etcd = testnet.StartCommand(tb, testnet.Command{Path: EtcdBin, Env: []string{
		"ETCD_NAME=dcs", "ETCD_DATA_DIR=" + filepath.Join(dir, "etcd"),
		"ETCD_LISTEN_CLIENT_URLS=http://" + p.dcs, "ETCD_ADVERTISE_CLIENT_URLS=http://" + p.dcs,
		"ETCD_LISTEN_PEER_URLS=http://" + peer, "ETCD_INITIAL_ADVERTISE_PEER_URLS=http://" + peer,
		"ETCD_INITIAL_CLUSTER=dcs=http://" + peer, "ETCD_LOG_LEVEL=warn"}})
	testnet.WaitHTTP(tb, "http://"+p.dcs+"/health", time.Minute, p.etcd)
	for i := range n {
		m := &Member{Name: fmt.Sprintf("pg%d", i+1), Addr: testnet.FreeAddr(tb), API: testnet.FreeAddr(tb)}
		m.data = filepath.Join(dir, m.Name)
		m.conf = filepath.Join(dir, m.Name+".yml")
		if err := os.WriteFile(m.conf, []byte(p.config(m)), 0o644); err != nil {
			tb.Fatal(err)
		}
		// Registered before Patroni's stop, so run after it: a PostgreSQL
		// whose Patroni was killed outlives it.
		tb.Cleanup(m.killPostgres)
		m.Proc = testnet.StartCommand(tb, testnet.Command{Path: PatroniBin, Args: []string{m.conf},
			Env: []string{"HOME=" + dir}, SysProcAttr: p.attr})
		p.Members = append(p.Members, m)
		if i == 0 { // the others copy it
			p.WaitPrimary(tb, m, time.Minute)
		}
	}
	p.WaitHealthy(tb, 2*time.Minute)
	return p
}

// config is a member's configuration file. Each member's PostgreSQL has
// a socket directory of its own; fsync is off, as a fault here kills
// processes, not the machine, and the kernel keeps what they wrote.
func (p *Patroni) config(m *Member) string {
	return fmt.Sprintf(`scope: %[1]s
name: %[2]s
log:
  level: WARNING
restapi:
  listen: %[3]s
  connect_address: %[3]s
etcd3:
  hosts: %[4]s
watchdog:
  mode: "off"
bootstrap:
  dcs:
    ttl: %[5]d
    loop_wait: %[6]d
    retry_timeout: %[7]d
    synchronous_mode: true
    synchronous_mode_strict: true
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_log_hints: "on"
        max_connections: 300
        fsync: "off"
        wal_keep_size: 256MB
  initdb:
  - encoding: UTF8
  - locale: C
%[13]spostgresql:
  listen: %[8]s
  connect_address: %[8]s
  data_dir: %[9]s
  bin_dir: %[10]s
  pgpass: %[11]s
  remove_data_directory_on_rewind_failure: true
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
    rewind: {username: postgres, password: postgres}
%[13]s  parameters:
    unix_socket_directories: %[12]s
`, scope, m.Name, m.API, p.dcs, TTL, LoopWait, RetryTimeout, m.Addr, m.data, BinDir,
		filepath.Join(p.dir, m.Name+".pgpass"), p.dir, hba)
}

// hba is pg_hba.conf, the bootstrap's and the members': any local user, no
// password.
const hba = `  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
`

// URL is the URL of database db through hosts (host:port each, in the
// order given), finding the primary among them.
func URL(db string, hosts ...string) string {
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/" + db +
		"?sslmode=disable&target_session_attrs=read-write"
}

// Database creates an empty database db on the primary.
func (p *Patroni) Database(tb testing.TB, db string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, URL("postgres", p.addrs()...))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		tb.Fatal(err)
	}
}

func (p *Patroni) addrs() []string {
	var out []string
	for _, m := range p.Members {
		out = append(out, m.Addr)
	}
	return out
}

// api asks Patroni's REST APIs, a connection each time (a member may be
// killed between two).
var api = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// is reports whether m's REST API answers 200 at path: /primary (it is the
// running leader), /sync (a running synchronous standby), /replica (a
// running standby).
func (m *Member) is(path string) bool {
	res, err := api.Get("http://" + m.API + path)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// IsPrimary reports whether m is the running primary.
func (m *Member) IsPrimary() bool { return m.is("/primary") }

// Primary returns the member that is the running primary, or nil.
func (p *Patroni) Primary() *Member {
	for _, m := range p.Members {
		if m.IsPrimary() {
			return m
		}
	}
	return nil
}

// WaitPrimary waits until m is the running primary.
func (p *Patroni) WaitPrimary(tb testing.TB, m *Member, timeout time.Duration) {
	tb.Helper()
	testnet.Eventually(tb, timeout, m.IsPrimary, func() string { return m.Name + " is not the primary:\n" + m.Output() })
}

// WaitHealthy waits until a member is the primary and every other one a
// running standby, one of them synchronous (with two members, the other).
func (p *Patroni) WaitHealthy(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	testnet.Eventually(tb, timeout, p.healthy, func() string { return "no primary with a synchronous standby:\n" + p.states() })
}

func (p *Patroni) healthy() bool {
	primaries, syncs := 0, 0
	for _, m := range p.Members {
		switch {
		case m.Exited():
			return false
		case m.is("/primary"):
			primaries++
		case m.is("/sync"):
			syncs++
		case !m.is("/replica"):
			return false
		}
	}
	return primaries == 1 && syncs >= 1
}

// states is each member's view, for a failure's message.
func (p *Patroni) states() string {
	var b strings.Builder
	for _, m := range p.Members {
		fmt.Fprintf(&b, "%s: primary %v, sync %v, exited %v\n", m.Name, m.is("/primary"), m.is("/sync"), m.Exited())
	}
	return b.String()
}

// Crash kills the member with SIGKILL, Patroni and its PostgreSQL at
// once, as when its machine fails: its leader lock, if it holds it,
// stays until the TTL ends.
func (m *Member) Crash() {
	syscall.Kill(m.Pid(), syscall.SIGKILL)
	m.killPostgres()
	m.Kill() // waits for the exit; the output's pipe closes with PostgreSQL
}

// killPostgres kills the member's postmaster, if it runs, with SIGKILL.
// Its children (each a session of its own) find it gone and exit, closing
// their connections.
func (m *Member) killPostgres() {
	raw, err := os.ReadFile(filepath.Join(m.data, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil || pid <= 1 {
		return
	}
	// A stale file's pid may be another process's by now: only a postgres.
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == filepath.Join(BinDir, "postgres") {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Start starts a member that was stopped or crashed again, with its data:
// it rejoins the cluster (rewound when it was a primary that fell behind
// the new timeline). It does not wait; WaitHealthy does.
func (m *Member) Start() { m.Proc.Restart() }

// RestartAll restarts every member's PostgreSQL as an operator does,
// `patronictl restart` of the cluster, one member after another, each
// restart waited for; the primary stays the primary.
func (p *Patroni) RestartAll(tb testing.TB) {
	tb.Helper()
	cmd := exec.Command(PatroniCtlBin, "-c", p.Members[0].conf, "restart", scope, "--force")
	cmd.Env = append(os.Environ(), "HOME="+p.dir)
	if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "Failed") {
		tb.Fatalf("patronictl restart: %v\n%s", err, out)
	}
}

// Exited reports whether etcd or a member's Patroni has exited.
func (p *Patroni) Exited() bool {
	if p.etcd.Exited() {
		return true
	}
	for _, m := range p.Members {
		if m.Exited() {
			return true
		}
	}
	return false
}
