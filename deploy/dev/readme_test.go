package dev_test

import (
	"os"
	"strings"
	"testing"

	core "github.com/slipverify/slipverify/core/config"
	"github.com/slipverify/slipverify/core/envflag"
	"github.com/slipverify/slipverify/deploy/broker"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	dispatcher "github.com/slipverify/slipverify/dispatcher/config"
	edge "github.com/slipverify/slipverify/edge/config"
	usage "github.com/slipverify/slipverify/usage/config"
)

// configRows renders the README's configuration table from the programs'
// own settings.
func configRows() []string {
	var rows []string
	add := func(tier string, vars []envflag.Var) {
		for _, v := range vars {
			def := "(empty)"
			if v.Default != "" {
				def = "`" + v.Default + "`"
			}
			rows = append(rows, "| `"+v.Env+"` | "+tier+" | "+def+" | "+v.Usage+" |")
		}
	}
	add("core", core.Vars())
	add("edge", edge.Vars())
	add("dispatcher", dispatcher.Vars())
	add("usage", usage.Vars())
	add("broker", broker.Vars())
	add("clickhouse", clickhouse.Vars())
	return rows
}

// TestREADMEConfigTable: the README's configuration table is the programs'
// own list of the variables they read, with the defaults and meanings the
// code has, row for row: no row missing, stale or repeated. To refresh the
// table, paste what this test prints when it fails.
func TestREADMEConfigTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const header = "| variable | tier | default | meaning |\n|---|---|---|---|\n"
	_, table, ok := strings.Cut(string(readme), header)
	if !ok {
		t.Fatal("README has no configuration table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	if want := strings.Join(configRows(), "\n"); table != want {
		t.Errorf("README's configuration table differs from the code's; it should read:\n%s", want)
	}
}
