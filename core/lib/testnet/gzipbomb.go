package testnet

import (
	"bytes"
	"compress/gzip"
	"mime/multipart"
)

// GzipForm returns a gzipped multipart form whose file part (named part)
// is size zero bytes, and its Content-Type: a small body that inflates to a
// large one, for tests of compressed request bodies. It is written to the
// gzip stream as it is made, so the form is never held whole.
func GzipForm(part string, size int) (body []byte, contentType string) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	mw := multipart.NewWriter(zw)
	w, _ := mw.CreateFormFile(part, "zeros.png")
	zeros := make([]byte, 1<<20)
	for n := size; n > 0; n -= len(zeros) {
		w.Write(zeros[:min(n, len(zeros))])
	}
	mw.Close()
	zw.Close()
	return gz.Bytes(), mw.FormDataContentType()
}
