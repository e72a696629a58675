//go:build linux

package rawsock

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Unread returns how many bytes c's socket received that were not read yet:
// what a close would reset the connection for. It returns 0 when it cannot
// tell (c is no socket, or is closed).
func Unread(c net.Conn) int {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}
