package testnet

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TLSServer starts an HTTPS server of h on loopback until the test ends and
// writes its certificate to a PEM file, for the programs under test to
// trust (SLIP_EGRESS_CA_FILE). It returns the server and the file's path.
func TLSServer(tb testing.TB, h http.Handler) (*httptest.Server, string) {
	tb.Helper()
	srv := httptest.NewTLSServer(h)
	tb.Cleanup(srv.Close)
	ca := filepath.Join(tb.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return srv, ca
}
