//go:build !linux || race

package rawsock

import "net"

// wrap keeps Go's own system calls: raw ones are Linux only, and the race
// detector cannot follow them.
func wrap(c net.Conn) net.Conn { return c }
