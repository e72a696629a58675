// Command loadgen is the bench's load generator: it drives the public API
// through the edge like real clients, open loop at a planned arrival rate or
// closed loop to find the peak, and reports throughput, latency percentiles
// and errors as a table, JSON and an HTML page; it also runs the standard
// suite against a fresh stack, compares two results and prints the capacity
// model. `loadgen help` lists the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(2)
	}
}
