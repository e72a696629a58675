// Command bankfake serves the fakes of KBank, SCB and RDCW (package
// bankfake) for the dev stack, so core can run its real connectors against
// them. It makes a CA, the banks' server certificate and core's client
// certificate in -dir, writes the settings that point core at the fakes to
// -env, and serves until interrupted:
//
//	go run ./core/bank/bankfake/cmd/bankfake -dir .data/bankfake -env .data/bankfake.env
//	set -a; . .data/bankfake.env; set +a; make run
//
// The fakes know the slips of bankfake's testdata (015278145821CTF09876
// from bank 014, 016143102633ATF01234 from 004, 202310051403SCBQR123 from
// 014 at SCB); any other reference is not found.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/slipverify/slipverify/core/bank/bankfake"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bankfake:", err)
		os.Exit(1)
	}
}

// logT is bankfake.T for a process: violations of the wire format are
// logged, not failed.
type logT struct {
	log      *slog.Logger
	dir      string
	cleanups []func()
}

func (t *logT) Helper()                        {}
func (t *logT) Errorf(format string, a ...any) { t.log.Error(fmt.Sprintf(format, a...)) }
func (t *logT) Fatal(a ...any)                 { t.log.Error(fmt.Sprint(a...)); os.Exit(1) }
func (t *logT) Fatalf(format string, a ...any) { t.Fatal(fmt.Sprintf(format, a...)) }
func (t *logT) Cleanup(f func())               { t.cleanups = append(t.cleanups, f) }
func (t *logT) TempDir() string                { return t.dir }

func run() error {
	dir := flag.String("dir", ".data/bankfake", "directory of the CA and certificates it makes")
	envFile := flag.String("env", ".data/bankfake.env", "file the settings for core are written to")
	route := flag.String("bank", "014=scb,*=kbank", "SLIP_BANK written to the settings")
	flag.Parse()
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return err
	}
	t := &logT{log: slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("tier", "bankfake"), dir: abs}
	defer func() {
		for i := len(t.cleanups) - 1; i >= 0; i-- {
			t.cleanups[i]()
		}
	}()
	pki := bankfake.NewPKI(t)
	kb := bankfake.NewKBank(t, pki, true)
	sc := bankfake.NewSCB(t, pki)
	rd := bankfake.NewRDCW(t, pki)
	settings := []string{
		"SLIP_BANK=" + *route,
		"SLIP_KBANK_URL=" + kb.URL(), "SLIP_KBANK_CLIENT_ID=" + bankfake.KBankClientID,
		"SLIP_KBANK_CLIENT_SECRET=" + bankfake.KBankClientSecret, "SLIP_KBANK_TEST_MODE=true",
		"SLIP_KBANK_CERT_FILE=" + pki.CertFile, "SLIP_KBANK_KEY_FILE=" + pki.KeyFile, "SLIP_KBANK_CA_FILE=" + pki.CAFile,
		"SLIP_SCB_URL=" + sc.URL(), "SLIP_SCB_API_KEY=" + bankfake.SCBAPIKey, "SLIP_SCB_API_SECRET=" + bankfake.SCBAPISecret,
		"SLIP_SCB_CERT_FILE=" + pki.CertFile, "SLIP_SCB_KEY_FILE=" + pki.KeyFile, "SLIP_SCB_CA_FILE=" + pki.CAFile,
		"SLIP_RDCW_URL=" + rd.URL(), "SLIP_RDCW_CLIENT_ID=" + bankfake.RDCWClientID, "SLIP_RDCW_CLIENT_SECRET=" + bankfake.RDCWClientSecret,
	}
	if err := os.WriteFile(*envFile, []byte(strings.Join(settings, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	t.log.Info("serving", "kbank", kb.URL(), "scb", sc.URL(), "rdcw", rd.URL(), "env", *envFile)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	t.log.Info("shutting down", "kbank_lookups", kb.Lookups(), "scb_lookups", sc.Lookups(), "rdcw_lookups", rd.Lookups())
	return nil
}
