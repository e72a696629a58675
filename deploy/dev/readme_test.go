package dev_test

import (
	"flag"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	core "github.com/slipverify/slipverify/core/config"
	"github.com/slipverify/slipverify/core/lib/envflag"
	"github.com/slipverify/slipverify/deploy/broker"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	dispatcher "github.com/slipverify/slipverify/dispatcher/config"
	edge "github.com/slipverify/slipverify/edge/config"
	usage "github.com/slipverify/slipverify/usage/config"
)

// configTable is one README's configuration table: the programs whose
// settings it lists. A table of one program has no program column.
type configTable struct {
	readme   string
	programs []string
	vars     [][]envflag.Var
}

// configTables are the READMEs' configuration tables: each tier's own
// settings in its README, the dev stack's programs in deploy's.
func configTables() []configTable {
	return []configTable{
		{"edge/README.md", []string{"edge"}, [][]envflag.Var{edge.Vars()}},
		{"core/README.md", []string{"core"}, [][]envflag.Var{core.Vars()}},
		{"dispatcher/README.md", []string{"dispatcher"}, [][]envflag.Var{dispatcher.Vars()}},
		{"usage/README.md", []string{"usage"}, [][]envflag.Var{usage.Vars()}},
		{"deploy/README.md", []string{"broker", "clickhouse"}, [][]envflag.Var{broker.Vars(), clickhouse.Vars()}},
	}
}

// header and rows render the table from the programs' own settings.
func (c configTable) header() string {
	if len(c.programs) == 1 {
		return "| variable | default | meaning |\n|---|---|---|\n"
	}
	return "| variable | program | default | meaning |\n|---|---|---|---|\n"
}

func (c configTable) rows() string {
	var rows []string
	for i, vars := range c.vars {
		for _, v := range vars {
			def := "(empty)"
			if v.Default != "" {
				def = "`" + v.Default + "`"
			}
			program := ""
			if len(c.programs) > 1 {
				program = " " + c.programs[i] + " |"
			}
			rows = append(rows, "| `"+v.Env+"` |"+program+" "+def+" | "+v.Usage+" |")
		}
	}
	return strings.Join(rows, "\n")
}

var update = flag.Bool("update", false, "rewrite the READMEs' configuration tables from the code")

// TestREADMEConfigTable: each tier README's configuration table is the
// program's own list of the variables it reads, with the defaults and
// meanings the code has, row for row: no row missing, stale or repeated.
// go test ./deploy/dev -run TestREADMEConfigTable -update rewrites them.
func TestREADMEConfigTable(t *testing.T) {
	for _, c := range configTables() {
		readme, err := os.ReadFile("../../" + c.readme)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(readme), c.header())
		if !ok {
			t.Errorf("%s has no configuration table (%s)", c.readme, strings.TrimSpace(c.header()))
			continue
		}
		n := 0 // the table: the lines after the header that start with |
		for n < len(rest) && rest[n] == '|' {
			if i := strings.IndexByte(rest[n:], '\n'); i >= 0 {
				n += i + 1
			} else {
				n = len(rest)
			}
		}
		table := rest[:n]
		if *update {
			text := strings.Replace(string(readme), c.header()+table, c.header()+c.rows()+"\n", 1)
			if err := os.WriteFile("../../"+c.readme, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if want := c.rows(); strings.TrimSuffix(table, "\n") != want {
			t.Errorf("%s's configuration table differs from the code's (go test ./deploy/dev -run TestREADMEConfigTable -update rewrites it); it should read:\n%s%s",
				c.readme, c.header(), want)
		}
	}
}

// docREADMEs are the READMEs (and pages) a newcomer is sent through from the root.
var docREADMEs = []string{"README.md", "edge/README.md", "core/README.md", "dispatcher/README.md",
	"usage/README.md", "deploy/README.md", "bench/README.md", "deploy/k8s/README.md", "deploy/postgresql.md"}

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestREADMELinks: every relative link of the READMEs names a file of the
// repository, and every #fragment a heading of its target, as GitHub
// names them (lower case, punctuation dropped, spaces as hyphens).
func TestREADMELinks(t *testing.T) {
	for _, readme := range docREADMEs {
		text, err := os.ReadFile("../../" + readme)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(withoutCode(string(text)), -1) {
			link := m[1]
			if strings.Contains(link, "://") {
				continue
			}
			file, frag, _ := strings.Cut(link, "#")
			target := readme
			if file != "" {
				target = path.Join(path.Dir(readme), file)
			}
			body, err := os.ReadFile("../../" + target)
			if err != nil {
				t.Errorf("%s: link %s: no file %s", readme, link, target)
				continue
			}
			if frag != "" && !slices.Contains(anchors(string(body)), frag) {
				t.Errorf("%s: link %s: %s has no heading #%s", readme, link, target, frag)
			}
		}
	}
}

// withoutCode drops fenced code blocks, whose brackets are no links.
func withoutCode(text string) string {
	var b strings.Builder
	in := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// anchors are the fragments GitHub gives a Markdown file's headings.
func anchors(text string) []string {
	var out []string
	for _, l := range strings.Split(withoutCode(text), "\n") {
		h := strings.TrimLeft(l, "#")
		if len(h) == len(l) || !strings.HasPrefix(h, " ") {
			continue
		}
		out = append(out, strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(h)))
	}
	return out
}

// TestREADMEPackageTables: each tier's README lists its packages as the
// tree holds them, in the first column of its "Packages" tables: every
// package it names exists, and every package of the tier is named, itself
// or through a folder above it (core/bank names its connectors in prose).
func TestREADMEPackageTables(t *testing.T) {
	for _, tier := range []string{"core", "edge", "dispatcher", "usage"} {
		text, err := os.ReadFile("../../" + tier + "/README.md")
		if err != nil {
			t.Fatal(err)
		}
		_, section, _ := strings.Cut(string(text), "\n## Packages\n")
		section, _, _ = strings.Cut(section, "\n## ")
		var named []string
		for _, line := range strings.Split(section, "\n") {
			cells := strings.Split(line, "|")
			if len(cells) < 3 {
				continue
			}
			for _, m := range pkgName.FindAllStringSubmatch(cells[1], -1) {
				named = append(named, m[1])
			}
		}
		if len(named) == 0 {
			t.Errorf("%s/README.md: no package table", tier)
			continue
		}
		for _, p := range named {
			if files, _ := filepath.Glob("../../" + p + "/*.go"); len(files) == 0 {
				t.Errorf("%s/README.md names %s, which holds no Go files", tier, p)
			}
		}
		filepath.WalkDir("../../"+tier, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || !goPackage(p) || strings.Contains(p, "/internal") || strings.Contains(p, "/testdata") {
				return err
			}
			pkg := strings.TrimPrefix(p, "../../")
			if !slices.ContainsFunc(named, func(n string) bool { return pkg == n || strings.HasPrefix(pkg, n+"/") }) {
				t.Errorf("%s/README.md: package %s is in no row of its package table", tier, pkg)
			}
			return nil
		})
	}
}

// pkgName is a package path in backquotes in a README table's first cell.
var pkgName = regexp.MustCompile("`([a-z]+(?:/[a-z0-9]+)*)`")

// goPackage reports whether dir holds a Go file that is not a test: a
// package every tier's README must name.
func goPackage(dir string) bool {
	files, _ := filepath.Glob(dir + "/*.go")
	return slices.ContainsFunc(files, func(f string) bool { return !strings.HasSuffix(f, "_test.go") })
}
