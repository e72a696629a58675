// Package serve runs the proxycompare benchmark's own fasthttp servers.
package serve

import (
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/bench/proxycompare/profile"
)

// Run serves srv on addr until SIGINT or SIGTERM, writing a CPU profile to
// cpuprofile meanwhile (none when empty), then shuts srv down.
func Run(srv *fasthttp.Server, addr, cpuprofile string) {
	defer profile.Start(cpuprofile)()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		if err := srv.Serve(ln); err != nil {
			log.Fatal(err)
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	_ = srv.Shutdown()
}
