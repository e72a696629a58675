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

// TestREADMEConfigTable: every variable a program reads is in the README's
// configuration table, with its default and meaning as the code has them.
// To refresh the table, paste what this test prints when it fails.
func TestREADMEConfigTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := configRows()
	for _, r := range rows {
		if !strings.Contains(string(readme), r+"\n") {
			t.Errorf("README lacks the row\n%s\nthe table should read:\n%s", r, strings.Join(rows, "\n"))
			return
		}
	}
}
