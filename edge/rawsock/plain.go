//go:build !linux || race || msan || asan

package rawsock

import "net"

// wrap keeps Go's own system calls: raw ones are Linux only, and the race
// detector and the memory sanitizers cannot follow them.
func wrap(c net.Conn, _ bool) net.Conn { return c }
