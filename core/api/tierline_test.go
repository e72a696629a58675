package api_test

import (
	"os/exec"
	"strings"
	"testing"
)

// module is the import path every package of the platform starts with.
const module = "github.com/slipverify/slipverify/"

// shared tells the packages under core/ that every tier may link: the
// contract (core/api) and the runtime the programs share, under core/lib/
// (configuration, Kafka links and streams, egress, IP lists, TLS files,
// logging, profiling, the test harness, the JSON writer, the seed file's
// format), and core/slip. Everything else under core/ is core's own.
func shared(pkg string) bool {
	return pkg == "core/api" || strings.HasPrefix(pkg, "core/lib/") ||
		// core/slip is the slip QR payload's wire format, which clients
		// send (the spec's codec, on the standard library alone): the
		// bench encodes its payloads with it, as any client may.
		pkg == "core/slip"
}

// TestTierLine: no program but core links core's store (bbolt) or any of
// core's own packages; the others reach core over HTTP and Kafka only.
func TestTierLine(t *testing.T) {
	for _, program := range []string{"edge/cmd/edge", "edge/cmd/slipsign", "dispatcher/cmd/dispatcher", "usage/cmd/usage", "bench/cmd/loadgen"} {
		out, err := exec.Command("go", "list", "-deps", module+program).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", program, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			own, inCore := strings.CutPrefix(dep, module)
			switch {
			case strings.HasPrefix(dep, "go.etcd.io/bbolt"):
				t.Errorf("%s links %s: only core keeps the store", program, dep)
			case inCore && strings.HasPrefix(own, "core/") && !shared(own):
				t.Errorf("%s links %s, one of core's own packages: it may link only the contract and the shared runtime", program, own)
			}
		}
	}
}
