// Package pgtest starts throwaway PostgreSQL clusters for tests, from the
// server binaries of Debian's postgresql-15 package: initdb and pg_ctl on a
// free loopback port, with a socket directory of their own. PostgreSQL
// refuses to run as root, so a test running as root runs the server as
// the postgres user the package creates. Without the binaries a test is
// skipped, except in CI (CI set), where it fails: CI installs them.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BinDir is where Debian's postgresql-15 package puts the server's
// programs.
const BinDir = "/usr/lib/postgresql/15/bin"

// Cluster is a running PostgreSQL cluster.
type Cluster struct {
	// Addr is its loopback listener, host:port.
	Addr string
	dir  string
	as   *user.User // the user the server runs as; nil: this process's
	n    atomic.Int64
}

// Start initialises and starts a cluster in a temporary directory,
// stopped and removed when tb ends.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	if _, err := os.Stat(filepath.Join(BinDir, "initdb")); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("PostgreSQL 15 is not installed (%v); CI installs postgresql-15", err)
		}
		tb.Skipf("PostgreSQL 15 is not installed (%v): apt-get install postgresql-15", err)
	}
	c := &Cluster{}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("running as root, PostgreSQL needs a user of its own: %v (the postgresql-15 package creates postgres)", err)
		}
		c.as = u
	}
	// Not tb.TempDir: its parents are closed to any user but this one.
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		tb.Fatal(err)
	}
	c.dir = dir
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if err := c.own(dir); err != nil {
		tb.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--locale=C", "-E", "UTF8"); err != nil {
		tb.Fatalf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	c.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300", port, dir)
	if out, err := c.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		tb.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	tb.Cleanup(func() { c.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop") })
	return c
}

// URL is the URL of database db in the cluster.
func (c *Cluster) URL(db string) string {
	return "postgres://postgres@" + c.Addr + "/" + db + "?sslmode=disable"
}

// Database creates an empty database and returns its URL.
func (c *Cluster) Database(tb testing.TB) string {
	tb.Helper()
	name := fmt.Sprintf("test_%d", c.n.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatal(err)
	}
	return c.URL(name)
}

// run runs one of the server's programs as the server's user.
func (c *Cluster) run(program string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(BinDir, program), args...)
	if c.as != nil {
		uid, _ := strconv.Atoi(c.as.Uid)
		gid, _ := strconv.Atoi(c.as.Gid)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = append(os.Environ(), "HOME="+c.dir)
	}
	cmd.Dir = c.dir
	return cmd.CombinedOutput()
}

// own gives dir to the server's user.
func (c *Cluster) own(dir string) error {
	if c.as == nil {
		return nil
	}
	uid, _ := strconv.Atoi(c.as.Uid)
	gid, _ := strconv.Atoi(c.as.Gid)
	return os.Chown(dir, uid, gid)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
