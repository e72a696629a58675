package rawsock_test

import (
	"errors"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/edge/rawsock"
)

// TestCloseDraining: a connection closed in stages while it holds bytes
// the peer sent and the server did not read ends cleanly: the peer reads
// the answer and then the end of the stream, where a plain close resets it.
func TestCloseDraining(t *testing.T) {
	for _, staged := range []bool{false, true} {
		s, c := pair(t)
		c.Write(make([]byte, 64<<10))   // a request the server reads one byte of
		io.ReadFull(s, make([]byte, 1)) // the rest of its first segment is there then
		s.Write([]byte("refused"))
		closed := make(chan error, 1)
		if staged {
			go func() { closed <- rawsock.CloseDraining(s, 1<<20, 10*time.Second) }()
		} else {
			closed <- s.Close()
		}
		got, err := io.ReadAll(c)
		switch {
		case string(got) != "refused":
			t.Errorf("staged %v: read %q, want the answer", staged, got)
		case staged && err != nil:
			t.Errorf("staged: %v after the answer, want the end of the stream", err)
		case !staged && !errors.Is(err, syscall.ECONNRESET):
			t.Errorf("plain close: %v after the answer; want a reset (else the test shows nothing)", err)
		}
		c.Close() // the peer ends: the staged close is done
		if err := <-closed; err != nil {
			t.Errorf("staged %v: close: %v", staged, err)
		}
	}
}

// TestCloseDrainingBounds: a peer that goes on sending, or neither sends
// nor closes, holds the staged close only to its bounds in bytes and time.
func TestCloseDrainingBounds(t *testing.T) {
	t.Run("bytes", func(t *testing.T) {
		s, c := pair(t)
		go io.Copy(c, neverEnding{}) // until the close resets it
		start := time.Now()
		if err := rawsock.CloseDraining(s, 256<<10, time.Minute); err != nil {
			t.Error(err)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("a flood held the close %v: past its bound in bytes", took)
		}
	})
	t.Run("time", func(t *testing.T) {
		s, _ := pair(t)
		start := time.Now()
		if err := rawsock.CloseDraining(s, 1<<20, 50*time.Millisecond); err != nil {
			t.Error(err)
		}
		if took := time.Since(start); took < 50*time.Millisecond || took > 30*time.Second {
			t.Errorf("a silent peer held the close %v; want its bound in time, 50ms (up to 100ms later)", took)
		}
	})
}

type neverEnding struct{}

func (neverEnding) Read(p []byte) (int, error) { return len(p), nil }
