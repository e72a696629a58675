package stack

import (
	"os"
	"testing"
)

// TestClusterOf reads the server a PostgreSQL process belongs to from its
// command line as /proc shows it: a backend's title, the postmaster's
// arguments.
func TestClusterOf(t *testing.T) {
	f := func(cmdline, want string) {
		t.Helper()
		if got := clusterOf(cmdline); got != want {
			t.Errorf("clusterOf(%q) = %q, want %q", cmdline, got, want)
		}
	}
	f("/usr/lib/postgresql/15/bin/postgres\x00-D\x00/d/postgres/primary\x00-p\x0041234\x00-k\x00/d/postgres\x00-c\x00listen_addresses=127.0.0.1\x00-c\x00cluster_name=primary\x00-c\x00synchronous_commit=on\x00", "primary")
	f("postgres: standby: walreceiver streaming 0/3000148", "standby")
	f("postgres: primary: slip slip 127.0.0.1(51234) idle in transaction", "primary")
	f("postgres: primary: walsender postgres [local] streaming 0/3000148", "primary")
	f("postgres: checkpointer ", "") // no cluster_name: no name in the title
	f("/usr/lib/postgresql/15/bin/postgres\x00-D\x00/d\x00", "")
}

// TestProcStat reads this process's own CPU time from /proc.
func TestProcStat(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	for i, x := 0, 0; i < 3e7; i++ { // some CPU time to see
		x += i
	}
	name, cpu, ok := procStat(os.Getpid())
	if !ok || name == "" || cpu <= 0 {
		t.Errorf("procStat: %q %v %v", name, cpu, ok)
	}
}
