module github.com/slipverify/slipverify

go 1.26

require (
	github.com/fasthttp/router v1.5.4
	github.com/google/uuid v1.6.0
	github.com/valyala/fasthttp v1.74.0
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/klauspost/compress v1.20.0 // indirect
	github.com/molecule-man/go-brrr v1.0.1 // indirect
	github.com/savsgio/gotils v0.0.0-20240704082632-aef3928b8a38 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
