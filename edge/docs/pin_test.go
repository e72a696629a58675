package docs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// TestBundleMatchesPin: the embedded bundle is the one redoc.pin names, as
// make redoc fetched it (a hand edit, or a refresh that did not rewrite the
// pin, fails), and its licenses travel with it.
func TestBundleMatchesPin(t *testing.T) {
	sum := sha256.Sum256(bundle)
	if got, want := hex.EncodeToString(sum[:]), pinField("sha256"); got != want {
		t.Errorf("redoc.standalone.js has SHA-256 %s, redoc.pin says %s: run make redoc", got, want)
	}
	if !bytes.Contains(bundle, []byte(`ReDoc Version: ","`+Version+`"`)) {
		t.Errorf("redoc.standalone.js is not Redoc %s, the version redoc.pin names", Version)
	}
	for _, f := range []string{"redoc/LICENSE", "redoc/redoc.standalone.js.LICENSE.txt"} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Contains(b, []byte("MIT")) {
			t.Errorf("%s: the bundle's license is missing (%v)", f, err)
		}
	}
}

// TestPageLoadsPinnedBundle: the page loads the embedded bundle, at a path
// named by its version, and the document from the edge.
func TestPageLoadsPinnedBundle(t *testing.T) {
	for _, want := range []string{`<script src="` + BundlePath + `">`, `spec-url="/openapi.json"`} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("the page lacks %s:\n%s", want, page)
		}
	}
}
