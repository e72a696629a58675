package rawsock

import (
	"io"
	"net"
	"time"
)

// CloseDraining closes c in stages (RFC 9112 9.6), for a server that ends a
// connection whose client may still be sending, such as one whose request it
// refused unread: it shuts c's sending side, so the client reads the answer
// and then the end of the stream, reads and discards what the client sends
// until the client closes, maxBytes were read or maxWait passed, and then
// closes c. A socket closed while it holds unread bytes resets the
// connection instead of ending it, and a client that has not read the
// answer by the time the reset arrives can lose it.
//
// The bounds hold a client that goes on sending to maxBytes and maxWait
// (it sees a reset then); one that closes after reading the answer, as an
// HTTP client does, is done with after a round trip. A c without CloseWrite
// is only closed.
func CloseDraining(c net.Conn, maxBytes int64, maxWait time.Duration) error {
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return c.Close()
	}
	if c.SetReadDeadline(time.Now().Add(maxWait)) == nil {
		io.CopyN(io.Discard, c, maxBytes) // io.Discard reads into a pooled buffer
	}
	return c.Close()
}
