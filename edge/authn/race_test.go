//go:build race

package authn

// raceEnabled: under the race detector sync.Pool drops what it is given at
// random, so allocation counts are meaningless.
const raceEnabled = true
