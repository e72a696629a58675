// Package profile starts a CPU profile for the benchmark's own programs.
package profile

import (
	"log"
	"os"
	"runtime/pprof"
)

// Start writes a CPU profile to path until the returned stop is called; an
// empty path profiles nothing.
func Start(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		log.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		log.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
