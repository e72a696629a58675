package dev_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// exampleREADMEs are the READMEs whose `sh make-run` blocks run against
// `make run`, in this order, on one stack: a later one sees the state an
// earlier one left, as a reader following them would (each sets its own
// shell variables).
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
// blocks against a stack started with make run, as a reader pastes a
// README's commands into a shell at the repository's root, and checks each
// shows what the README says it shows and exits as it says. The stack listens on free
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

// runExamples runs commands against a stack started with the settings env:
// each README's in a shell of its own, as a reader who opens that README
// alone would.
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
	shellEnv := append(append(os.Environ(), s.env...), "SLIP_ADMIN_URL=http://"+p.admin)

	for len(all) > 0 {
		n := 1
		for n < len(all) && all[n].readme == all[0].readme {
			n++
		}
		readme := all[:n]
		all = all[n:]
		if readme[0].readme == "usage/README.md" {
			// The ledger's numbers are exact once the pipeline has
			// drained, as that README says: wait for it first.
			waitDrained(t, p.usage)
		}
		var script strings.Builder
		script.WriteString("exec 2>&1\n")
		for i, e := range readme {
			fmt.Fprintf(&script, "printf '\\n@@cmd %d\\n'\n%s\nprintf '\\n@@status %%d\\n' $?\n", i, addrs.Replace(e.cmd))
		}
		// A file, not the shell's input: a command that reads its input
		// must not eat the commands after it.
		file := filepath.Join(t.TempDir(), "examples.sh")
		if err := os.WriteFile(file, []byte(script.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-u", file)
		cmd.Dir, cmd.Env = dir, shellEnv
		var buf bytes.Buffer
		cmd.Stdout = &buf
		if err := cmd.Run(); err != nil {
			t.Logf("%s: shell: %v", readme[0].readme, err)
		}
		checkOutput(t, readme, buf.String())
	}
}

// checkOutput holds each command's part of out, the shell's output, to what the
// README shows.
func checkOutput(t *testing.T, readme []example, out string) {
	t.Helper()
	for i, e := range readme {
		_, after, ok := strings.Cut(out, fmt.Sprintf("\n@@cmd %d\n", i))
		if !ok {
			t.Errorf("%s:%d: `%s` did not run; the shell's output:\n%s", e.readme, e.line, e.cmd, out)
			return
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

// waitDrained waits until usage's /reconcile shows no consumer lag and no
// drift: every usage event in the ledger.
func waitDrained(t *testing.T, usage string) {
	t.Helper()
	last := "no answer"
	testnet.Eventually(t, time.Minute, func() bool {
		res, err := http.Get("http://" + usage + "/reconcile")
		if err != nil {
			last = err.Error()
			return false
		}
		defer res.Body.Close()
		var r struct {
			Lag   int `json:"lagMessages"`
			Drift int `json:"drift"`
		}
		if err := json.NewDecoder(res.Body).Decode(&r); err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("lag %d messages, %d rows drifting", r.Lag, r.Drift)
		return r.Lag == 0 && r.Drift == 0
	}, func() string { return "the ledger did not catch up with core: " + last })
}
