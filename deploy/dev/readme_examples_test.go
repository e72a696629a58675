package dev_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// exampleREADMEs are the READMEs whose `sh make-run` blocks run against
// `make run`, in this order (a later one may rely on what an earlier one
// did, as a reader following them would).
var exampleREADMEs = []string{"README.md", "edge/README.md", "core/README.md", "dispatcher/README.md",
	"usage/README.md", "deploy/README.md", "bench/README.md"}

// example is one command of a README's `sh make-run` block and the output
// the README shows for it.
type example struct {
	readme string
	line   int      // of the command's first line
	cmd    string   // as written, continuation lines included
	want   []string // fragments the output holds, in this order
	status int      // the exit status the README states, else 0
	env    string   // settings make run needs for it: "```sh make-run NAME=value ..."
}

// parseExamples reads the commands of a README's blocks fenced as
// "```sh make-run". A command is a line (with its `\` continuations) that
// is not a comment; the comment lines after it that begin with "# → " (then
// "#   " for more lines) show its output: "…" stands for anything, and so
// does a line break. An output shown as "(exits N) …" states the exit
// status; any other command must exit 0.
func parseExamples(readme, text string) []example {
	var out []example
	in, env := false, ""
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "```sh make-run"):
			in, env = true, strings.TrimSpace(strings.TrimPrefix(l, "```sh make-run"))
			continue
		case strings.HasPrefix(l, "```"):
			in = false
			continue
		}
		if !in || strings.TrimSpace(l) == "" {
			continue
		}
		if strings.HasPrefix(l, "# → ") && len(out) > 0 {
			e := &out[len(out)-1]
			w := strings.TrimPrefix(l, "# → ")
			if s, ok := strings.CutPrefix(w, "(exits "); ok {
				n, rest, _ := strings.Cut(s, ") ")
				e.status, _ = strconv.Atoi(n)
				w = rest
			}
			e.want = append(e.want, strings.Split(w, "…")...)
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "#   ") {
				i++
				e.want = append(e.want, strings.Split(strings.TrimPrefix(lines[i], "#   "), "…")...)
			}
			continue
		}
		if strings.HasPrefix(l, "#") {
			continue
		}
		e := example{readme: readme, line: i + 1, cmd: l, env: env}
		for strings.HasSuffix(lines[i], `\`) && i+1 < len(lines) {
			i++
			e.cmd += "\n" + lines[i]
		}
		out = append(out, e)
	}
	return out
}

// TestREADMEExamples runs every command of the READMEs' `sh make-run`
// blocks against a stack started with make run, as a reader pastes them
// into one shell at the repository's root, and checks each shows what the
// README says it shows and exits as it says. The stack listens on free
// ports, so the commands' addresses are rewritten to them; the shell's
// working directory holds the repository's bin/ and deploy/ and the
// stack's data directory as .data.
func TestREADMEExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the whole stack")
	}
	var all []example
	for _, readme := range exampleREADMEs {
		text, err := os.ReadFile("../../" + readme)
		if err != nil {
			t.Fatal(err)
		}
		ex := parseExamples(readme, string(text))
		if readme == "README.md" && len(ex) < 8 {
			t.Errorf("README.md has %d commands in sh make-run blocks: the tour is missing", len(ex))
		}
		all = append(all, ex...)
	}

	// One stack for the blocks of each set of settings, in the order the
	// sets first appear.
	var envs []string
	for _, e := range all {
		if !slices.Contains(envs, e.env) {
			envs = append(envs, e.env)
		}
	}
	for _, env := range envs {
		var group []example
		for _, e := range all {
			if e.env == env {
				group = append(group, e)
			}
		}
		name := env
		if name == "" {
			name = "make_run"
		}
		t.Run(name, func(t *testing.T) { runExamples(t, env, group) })
	}
}

// runExamples runs commands in one shell against a stack started with the
// settings env.
func runExamples(t *testing.T, env string, all []example) {
	dataDir := t.TempDir()
	p := freePorts(t)
	s := startStack(t, dataDir, p, strings.Fields(env)...)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, target := range map[string]string{"bin": root + "/bin", "deploy": root + "/deploy", ".data": dataDir} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	addrs := strings.NewReplacer("127.0.0.1:8080", p.edge, "127.0.0.1:8081", p.core, "127.0.0.1:8084", p.usage,
		"127.0.0.1:8085", p.admin, "127.0.0.1:9180", p.metrics)

	var script strings.Builder
	script.WriteString("exec 2>&1\n")
	for i, e := range all {
		if e.readme == "usage/README.md" && (i == 0 || all[i-1].readme != e.readme) {
			// The ledger's numbers are exact once the pipeline has
			// drained, as its README says: wait for that first.
			script.WriteString(drained(p.usage))
		}
		fmt.Fprintf(&script, "printf '\\n@@cmd %d\\n'\n%s\nprintf '\\n@@status %%d\\n' $?\n", i, addrs.Replace(e.cmd))
	}
	out := runScript(t, s, p, dir, script.String())

	for i, e := range all {
		_, after, ok := strings.Cut(out, fmt.Sprintf("\n@@cmd %d\n", i))
		if !ok {
			t.Fatalf("%s:%d: `%s` did not run; the shell's output:\n%s", e.readme, e.line, e.cmd, out)
		}
		got, rest, _ := strings.Cut(after, "\n@@status ")
		status, _ := strconv.Atoi(strings.SplitN(rest, "\n", 2)[0])
		if status != e.status {
			t.Errorf("%s:%d: `%s` exited %d, the README says %d:\n%s", e.readme, e.line, e.cmd, status, e.status, got)
		}
		at := got
		for _, w := range e.want {
			w = strings.TrimSpace(w)
			j := strings.Index(at, w)
			if j < 0 {
				t.Errorf("%s:%d: `%s` does not show %q where the README has it; it printed:\n%s", e.readme, e.line, e.cmd, w, got)
				break
			}
			at = at[j+len(w):]
		}
	}
}

// runScript runs script in bash in dir with the stack's settings (which
// programs such as bin/usage read) and returns its output.
func runScript(t *testing.T, s *stack, p ports, dir, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-u")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), s.env...), "SLIP_ADMIN_URL=http://"+p.admin)
	cmd.Stdin = strings.NewReader(script)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		t.Logf("shell: %v", err)
	}
	return out.String()
}

// drained is a shell loop that polls usage's /reconcile until it shows no
// consumer lag and no drift, for a minute at most.
func drained(usage string) string {
	return `for _ in $(seq 600); do curl -s http://` + usage + `/reconcile | grep -q '"lagMessages":0,"drift":0' && break; sleep 0.1; done` + "\n"
}
