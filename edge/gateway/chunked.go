package gateway

import (
	"bytes"
	"sync/atomic"
	"unsafe"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
)

// HeaderReceived is the server's hook after a request's head is read and
// before its body is: it remembers the route format of a chunked request,
// whose size is known only as its body is read. fasthttp resets a request
// whose chunked body runs over the server's limit before it calls
// ErrorHandler, which then finds the format here. The server must call it
// (fasthttp.Server.HeaderReceived, with any other hook of its own).
func (g *Gateway) HeaderReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.ContentLength() == -1 {
		path, _, _ := bytes.Cut(h.RequestURI(), []byte("?"))
		if _, rest, abs := bytes.Cut(path, []byte("://")); abs { // absolute form: the path after the host
			path = rest[max(0, bytes.IndexByte(rest, '/')):]
		}
		v, code := refusalOfBody(h.Method(), path)
		g.chunked.put(h, v, code)
	}
	return fasthttp.RequestConfig{} // the server's limits
}

// refusalOfBody is the answer to a body over the edge's limit on the route
// of method and path: IMAGE_SIZE_TOO_LARGE on the routes whose body carries
// one image, VALIDATION_ERROR elsewhere, in the path's version.
func refusalOfBody(method, path []byte) (api.Version, api.Code) {
	for i := range Routes {
		if Routes[i].Image && Routes[i].Path == string(path) && Routes[i].Method == string(method) {
			return Routes[i].Version, api.ImageSizeTooLarge
		}
	}
	return versionOfPath(path), api.Validation
}

// chunkedMemo remembers the refusal format of the chunked requests being
// read, by the address of their header (a RequestCtx's, reused for every
// request of its connection), in a fixed table: it holds no memory per
// connection and needs no clean-up, whatever becomes of the connection. A
// slot taken by another request in between (two chunked uploads at once
// whose headers share a slot) is a miss: the answer then takes the
// version of the connection's last head (see Listen) and VALIDATION_ERROR.
type chunkedMemo [256]atomic.Uintptr

// A slot holds the header's address with the format in its two low bits:
// a RequestHeader is aligned to at least 4 bytes.
const (
	memoV2    = 1
	memoImage = 2
	memoBits  = memoV2 | memoImage
)

func memoKey(h *fasthttp.RequestHeader) uintptr { return uintptr(unsafe.Pointer(h)) }

func (m *chunkedMemo) slot(key uintptr) *atomic.Uintptr {
	return &m[(key>>4^key>>12)%uintptr(len(m))]
}

func (m *chunkedMemo) put(h *fasthttp.RequestHeader, v api.Version, code api.Code) {
	key := memoKey(h)
	val := key
	if v == api.V2 {
		val |= memoV2
	}
	if code == api.ImageSizeTooLarge {
		val |= memoImage
	}
	m.slot(key).Store(val)
}

// take returns the format remembered for h, and forgets it.
func (m *chunkedMemo) take(h *fasthttp.RequestHeader) (api.Version, api.Code, bool) {
	key := memoKey(h)
	s := m.slot(key)
	val := s.Load()
	if val&^memoBits != key || !s.CompareAndSwap(val, 0) {
		return 0, 0, false
	}
	v, code := api.V1, api.Validation
	if val&memoV2 != 0 {
		v = api.V2
	}
	if val&memoImage != 0 {
		code = api.ImageSizeTooLarge
	}
	return v, code, true
}
