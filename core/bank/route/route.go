// Package route picks the upstream of each lookup by the slip's sending
// bank, from a route list such as
//
//	014=scb,*=kbank
//
// which sends slips of SCB (014) to the SCB connector and every other bank
// to KBank. A plain name (kbank) is the list *=kbank. A bank listed twice,
// or * twice, is an error; a bank neither listed nor covered by * is
// answered bank.ErrUpstream without asking anyone. Wallet lookups go to
// the * upstream.
package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/slipverify/slipverify/core/bank"
)

// Any is the route list's key for every bank not listed.
const Any = "*"

// Table maps sending-bank codes to upstream names; Default serves the rest
// and wallets ("" when the list has no *).
type Table struct {
	ByBank  map[string]string
	Default string
}

// Parse reads a route list, or a single upstream name, reporting every
// problem at once. known lists the upstream names allowed.
func Parse(s string, known []string) (Table, error) {
	t := Table{ByBank: map[string]string{}}
	var errs []error
	if name := strings.TrimSpace(s); !strings.Contains(s, "=") {
		if !slices.Contains(known, name) {
			return Table{}, fmt.Errorf("%q is not %s, or a route list such as 014=scb,*=kbank", name, strings.Join(known, ", "))
		}
		t.Default = name
		return t, nil
	}
	for _, item := range strings.Split(s, ",") {
		code, name, ok := strings.Cut(strings.TrimSpace(item), "=")
		code, name = strings.TrimSpace(code), strings.TrimSpace(name)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%q is not bank=upstream", item))
			continue
		case !slices.Contains(known, name):
			errs = append(errs, fmt.Errorf("%q: upstream %q is not %s", item, name, strings.Join(known, ", ")))
			continue
		}
		switch {
		case code == Any:
			if t.Default != "" {
				errs = append(errs, fmt.Errorf("%q: * listed twice", item))
			}
			t.Default = name
		case len(code) != 3 || strings.Trim(code, "0123456789") != "":
			errs = append(errs, fmt.Errorf("%q: bank %q is not 3 digits or *", item, code))
		case t.ByBank[code] != "":
			errs = append(errs, fmt.Errorf("%q: bank %s listed twice", item, code))
		default:
			t.ByBank[code] = name
		}
	}
	if len(errs) > 0 {
		return Table{}, errors.Join(errs...)
	}
	return t, nil
}

// Names returns the upstreams t uses, sorted, each once.
func (t Table) Names() []string {
	var out []string
	if t.Default != "" {
		out = append(out, t.Default)
	}
	for _, n := range t.ByBank {
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Connector is a bank.Connector that asks the upstream its table names.
type Connector struct {
	byBank map[string]bank.Connector
	def    bank.Connector
}

var _ bank.Connector = (*Connector)(nil)

// New returns the connector routing by t over conns, which must hold every
// name t uses.
func New(t Table, conns map[string]bank.Connector) (*Connector, error) {
	c := &Connector{byBank: map[string]bank.Connector{}}
	var errs []error
	for _, n := range t.Names() {
		if conns[n] == nil {
			errs = append(errs, fmt.Errorf("route: no connector %q", n))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for code, n := range t.ByBank {
		c.byBank[code] = conns[n]
	}
	if t.Default != "" {
		c.def = conns[t.Default]
	}
	return c, nil
}

// Bank asks the upstream of bankCode.
func (c *Connector) Bank(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	up := c.byBank[bankCode]
	if up == nil {
		up = c.def
	}
	if up == nil {
		return bank.Slip{}, fmt.Errorf("%w: route: no upstream for bank %.10q", bank.ErrUpstream, bankCode)
	}
	return up.Bank(ctx, bankCode, transRef)
}

// Wallet asks the * upstream.
func (c *Connector) Wallet(ctx context.Context, transactionID string) (bank.WalletSlip, error) {
	if c.def == nil {
		return bank.WalletSlip{}, fmt.Errorf("%w: route: no upstream for wallets (no * in the route list)", bank.ErrUpstream)
	}
	return c.def.Wallet(ctx, transactionID)
}
