// Command usage is the usage tier: it consumes slip.usage into the
// ClickHouse ledger and serves metrics, health and reconciliation
// (`usage`), prints finance reports (`usage report`), and reconciles the
// ledger with core's quota counters (`usage reconcile`).
package main

import "github.com/slipverify/slipverify/core/lib/envflag"

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { envflag.Main("usage", run) }
