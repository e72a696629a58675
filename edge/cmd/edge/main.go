// Command edge is the public front door: it authenticates every request
// (Bearer keys, signed requests, nonces, IP allow lists), applies the
// dynamic rate limits, answers rejections itself and forwards the rest to
// core.
package main

import "github.com/slipverify/slipverify/core/lib/envflag"

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { envflag.Main("edge", run) }
