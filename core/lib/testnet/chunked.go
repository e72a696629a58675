package testnet

import (
	"fmt"
	"io"
)

// SendChunked writes a request's head (its request line and headers, each
// ending in CRLF, without the blank line), declares a chunked body and
// sends n chunks of chunk and the last chunk. It stops at the first write
// that fails: a server that answered early may close the connection.
func SendChunked(w io.Writer, head, chunk string, n int) {
	if _, err := io.WriteString(w, head+"Transfer-Encoding: chunked\r\n\r\n"); err != nil {
		return
	}
	for range n {
		if _, err := fmt.Fprintf(w, "%x\r\n%s\r\n", len(chunk), chunk); err != nil {
			return
		}
	}
	io.WriteString(w, "0\r\n\r\n")
}
