package chstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/lib/tlsfiles"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// TestSecureLedger: against a ClickHouse server whose native port speaks
// TLS only and that lets in one user with a password, the ledger is
// written and read over TLS with that login; a wrong password, an
// untrusted certificate and plaintext are refused, the first two with the
// setting to check.
func TestSecureLedger(t *testing.T) {
	pki := bankfake.NewPKI(t)
	cert, key := testnet.PEMFiles(t, pki.Server)
	srv := clickhouse.StartTestConfig(t, clickhouse.Config{CertFile: cert, KeyFile: key, User: "slip", Password: "ledger-password"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	open := func(t *testing.T, password string, link chstore.TLS) (*chstore.Store, error) {
		t.Helper()
		tc, err := link.Config()
		if err != nil {
			t.Fatal(err)
		}
		st, err := chstore.Open(chstore.Options{Addrs: []string{srv.Addr()}, Database: "slip", Username: "slip", Password: password, TLS: tc})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st, st.Migrate(ctx)
	}
	trusted := chstore.TLS{On: true, Files: tlsfiles.Files{CAFile: pki.CAFile}}

	st, err := open(t, "ledger-password", trusted)
	if err != nil {
		t.Fatal(err)
	}
	rows := &chstore.Rows{}
	var events []api.UsageEvent
	for i := range 10 {
		e := ledgertest.Event(i, "svc-secure", "br-1", time.Now())
		events = append(events, e)
		if err := rows.Append(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Insert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	want := ledgertest.Want(events)
	want.Rows = uint64(len(events))
	if got, err := ledgertest.Count(ctx, st); err != nil || got != want {
		t.Fatalf("ledger over TLS: %v, %v; want %v", got, err, want)
	}

	for _, c := range []struct {
		name     string
		password string
		link     chstore.TLS
		hint     string // what Refused says; empty: not a refusal it names
	}{
		{"wrong password", "wrong-password", trusted, "check SLIP_CLICKHOUSE_USER and SLIP_CLICKHOUSE_PASSWORD"},
		{"untrusted certificate", "ledger-password", chstore.TLS{On: true, Files: tlsfiles.Files{CAFile: bankfake.NewPKI(t).CAFile}}, "check SLIP_CLICKHOUSE_TLS_CA_FILE"},
		{"wrong server name", "ledger-password", chstore.TLS{On: true, Files: trusted.Files, ServerName: "ch.example"}, "check SLIP_CLICKHOUSE_TLS_SERVER_NAME"},
		{"plaintext", "ledger-password", chstore.TLS{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := open(t, c.password, c.link)
			if err == nil {
				t.Fatal("the server let it in")
			}
			refused, hint := chstore.Refused(err)
			if c.hint != "" && (!refused || !strings.Contains(hint, c.hint)) {
				t.Errorf("%v: refused %v, %q; want a hint saying %q", err, refused, hint, c.hint)
			}
		})
	}
}
