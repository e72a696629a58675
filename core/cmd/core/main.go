// Command core is the verification tier: it verifies slips, keeps quotas and
// holds all state in bbolt. Only the edge reaches it.
package main

import "github.com/slipverify/slipverify/core/lib/envflag"

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { envflag.Main("core", run) }
