package testnet

import (
	"syscall"
	"testing"
)

// Command is a program that is not one of the platform's (a database, a
// coordinator): its arguments, and how it runs.
type Command struct {
	Path string
	Args []string
	Env  []string // added to the test's environment, as Start's env
	// SysProcAttr is the process's attributes, such as the user it runs
	// as (PostgreSQL refuses root); nil, as this process.
	SysProcAttr *syscall.SysProcAttr
}

// StartCommand runs c as Start runs a program: until the test ends (then
// SIGTERM and a wait for its exit), its output kept and printed if the test
// failed. Restart runs it again with the same arguments.
func StartCommand(tb testing.TB, c Command) *Proc {
	tb.Helper()
	return startProc(tb, &Proc{tb: tb, bin: c.Path, args: c.Args, attr: c.SysProcAttr, env: c.Env})
}
