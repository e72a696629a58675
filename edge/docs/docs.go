// Package docs serves the API reference for merchants: a page at GET /docs
// that renders the OpenAPI document of GET /openapi.json with Redoc.
//
// Redoc's standalone bundle is embedded (redoc/redoc.standalone.js, with its
// licenses), so the page needs nothing beyond the edge: no CDN, no fonts.
// It is the npm package's file as published, pinned in redoc/redoc.pin
// (version, package integrity, SHA-256) and refreshed by `make redoc`,
// which runs redoc/fetch.sh; TestBundleMatchesPin holds the file to the pin.
package docs

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"strings"
	"sync"

	"github.com/valyala/fasthttp"
)

var (
	//go:embed page.html
	pageTemplate []byte
	//go:embed redoc/redoc.standalone.js
	bundle []byte
	//go:embed redoc/redoc.pin
	pin string
)

// Version is the pinned Redoc version, from redoc/redoc.pin.
var Version = pinField("version")

// PagePath is the path of the API reference page.
const PagePath = "/docs"

// BundlePath is where the page loads Redoc from: named by its version, so
// browsers may keep it for good.
var BundlePath = "/docs/redoc-" + Version + ".standalone.js"

var page = bytes.ReplaceAll(pageTemplate, []byte("{{bundle}}"), []byte(BundlePath))

// policy is the page's Content-Security-Policy: scripts from the edge only,
// the document from the edge only. Redoc writes its styles inline
// (styled-components) and runs its search index in a worker made from a
// blob, so those two are allowed.
const policy = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; worker-src blob:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// ServePage answers the page.
func ServePage(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetContentType("text/html; charset=utf-8")
	h.Set("Content-Security-Policy", policy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	ctx.SetBody(page)
}

var (
	gzipOnce sync.Once
	gzipped  []byte
)

// ServeBundle answers Redoc's bundle, gzipped when the client takes it
// (1.1 MB, about a third of it gzipped: compressed once, on first use).
func ServeBundle(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetContentType("text/javascript; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("Vary", "Accept-Encoding")
	if !ctx.Request.Header.HasAcceptEncoding("gzip") {
		ctx.SetBody(bundle)
		return
	}
	gzipOnce.Do(func() {
		var b bytes.Buffer
		w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		w.Write(bundle)
		w.Close()
		gzipped = b.Bytes()
	})
	h.Set("Content-Encoding", "gzip")
	ctx.SetBody(gzipped)
}

// pinField returns the value of a "name value" line of redoc.pin.
func pinField(name string) string {
	for _, line := range strings.Split(pin, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	panic("edge/docs: redoc.pin has no " + name)
}
