// Package profiling serves the Go runtime's profiles (net/http/pprof) on a
// fasthttp listener, under /debug/pprof/, for `go tool pprof`. Core and the
// edge serve it on their private listeners only; see the README's
// Operations section.
package profiling

import (
	"bytes"
	httppprof "net/http/pprof"
	"strconv"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Prefix is the path every profile is served under.
const Prefix = "/debug/pprof/"

// MaxSeconds bounds a CPU profile or an execution trace. The adaptor from
// net/http holds an answer in memory until it is complete, and a trace of a
// busy process grows by megabytes a second.
const MaxSeconds = 60

var (
	index   = fasthttpadaptor.NewFastHTTPHandlerFunc(httppprof.Index) // the list, and every named profile (heap, goroutine, …)
	profile = fasthttpadaptor.NewFastHTTPHandlerFunc(httppprof.Profile)
	trace   = fasthttpadaptor.NewFastHTTPHandlerFunc(httppprof.Trace)
	symbol  = fasthttpadaptor.NewFastHTTPHandlerFunc(httppprof.Symbol)
)

// Is reports whether path is a profile's: /debug/pprof or below it.
func Is(path []byte) bool {
	return bytes.HasPrefix(path, []byte(Prefix)) || string(path) == Prefix[:len(Prefix)-1]
}

// Serve answers a request for a profile. /debug/pprof/cmdline is not
// served: every setting, secrets included, can be given as a flag, and the
// command line would show them. A CPU profile or trace longer than
// MaxSeconds is refused with 400.
func Serve(ctx *fasthttp.RequestCtx) {
	path := ctx.Path()
	if string(path) == Prefix[:len(Prefix)-1] {
		ctx.Redirect(Prefix, fasthttp.StatusMovedPermanently)
		return
	}
	name := string(path[len(Prefix):])
	switch name {
	case "cmdline":
		ctx.Error("not served: the command line may carry secrets\n", fasthttp.StatusNotFound)
	case "profile", "trace":
		if s, err := strconv.Atoi(string(ctx.QueryArgs().Peek("seconds"))); err == nil && s > MaxSeconds {
			ctx.Error("seconds: at most "+strconv.Itoa(MaxSeconds)+"\n", fasthttp.StatusBadRequest)
			return
		}
		if name == "profile" {
			profile(ctx)
		} else {
			trace(ctx)
		}
	case "symbol":
		symbol(ctx)
	default:
		index(ctx)
	}
}
