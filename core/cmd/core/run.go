package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/bank/httpbank"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/config"
	"github.com/slipverify/slipverify/core/egress"
	"github.com/slipverify/slipverify/core/qrscan"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/seed"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

// maxBody admits a 4 MiB image as base64 or multipart with room to spare,
// so an oversized image is answered IMAGE_SIZE_TOO_LARGE, not a bare 413.
const maxBody = 8 << 20

// shutdownGrace bounds how long in-flight requests may finish on SIGTERM.
const shutdownGrace = 10 * time.Second

func run(ctx context.Context, args []string, getenv func(string) string) error {
	cfg, err := config.Load(args, getenv)
	if err != nil {
		return err
	}
	if done, err := cfg.Done("core", version, cfg.Validate); done {
		return err
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "core")

	box, err := secret.New(cfg.MasterKey)
	if err != nil {
		return err
	}
	var sf seed.File
	if cfg.Seed != "" {
		if sf, err = seed.Read(cfg.Seed); err != nil {
			return err
		}
	}
	upstream, err := connector(cfg, sf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return err
	}
	st, err := store.Open(filepath.Join(cfg.DataDir, "core.db"), time.Now)
	if err != nil {
		return err
	}
	defer st.Close()
	if n, err := st.InsertMissing(sf.Records(box)); err != nil {
		return fmt.Errorf("load seed: %w", err)
	} else if cfg.Seed != "" {
		log.Info("seed loaded", "file", cfg.Seed, "inserted", n)
	}

	allow, _ := egress.ParsePrefixes(cfg.EgressAllow) // checked by Validate
	fetch, err := egress.New(egress.Config{
		Policy: egress.NewPolicy(allow), CAFile: cfg.EgressCA, Timeout: cfg.FetchTimeout,
		MaxBytes: qrscan.MaxBytes, MaxRedirects: 3,
	})
	if err != nil {
		return err
	}
	v := &verify.Verifier{Store: st, Upstream: upstream, Images: verify.Images{Egress: fetch}}
	srv := &fasthttp.Server{
		Handler:               server.New(v, st, box, cfg.EdgeToken, cfg.MaxInflight, log).Handler(),
		NoDefaultServerHeader: true, // the edge names itself to clients
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          30 * time.Second,
		IdleTimeout:           2 * time.Minute,
		MaxRequestBodySize:    maxBody,
		NoDefaultDate:         true,
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "bank", cfg.Bank, "version", version)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// Connections still open after the grace (a client that connected and
	// sent nothing) close with the process; that is not a failed shutdown.
	err = srv.ShutdownWithContext(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn("closing connections still open after the grace")
		return nil
	}
	return err
}

// connector returns the bank connector cfg names; the sandbox takes its
// scripted slips from the seed file.
func connector(cfg config.Config, sf seed.File) (bank.Connector, error) {
	if cfg.Bank == "http" {
		return httpbank.New(httpbank.Config{URL: cfg.BankURL, Timeout: cfg.BankTimeout})
	}
	var sc sandbox.Config
	if len(sf.Sandbox) > 0 {
		dec := json.NewDecoder(bytes.NewReader(sf.Sandbox))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sc); err != nil {
			return nil, fmt.Errorf("seed sandbox: %w", err)
		}
	}
	return sandbox.New(sc, time.Now)
}
