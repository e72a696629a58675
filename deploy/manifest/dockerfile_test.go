package manifest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerfile returns deploy/Dockerfile's instructions, continuation lines
// joined and comments dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "deploy/Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		cur += " " + strings.TrimSpace(strings.TrimSuffix(line, "\\"))
		if strings.HasSuffix(line, "\\") {
			continue
		}
		if s := strings.TrimSpace(cur); s != "" {
			out = append(out, s)
		}
		cur = ""
	}
	return out
}

// makeCmds returns the packages of the Makefile's CMDS.
func makeCmds(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CMDS\s*:?=\s*(.*)$`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("Makefile has no CMDS")
	}
	return strings.Fields(m[1])
}

var cmdPath = regexp.MustCompile(`\./[a-z0-9_/]+/cmd/[a-z0-9_]+`)

// TestDockerfile: the image builds every program the Makefile builds (and
// the probe its health checks run), each one a real command; the runtime
// stage is not the build image and runs as a non-root user; no SLIP_*
// setting and no secret is baked into the image.
func TestDockerfile(t *testing.T) {
	lines := dockerfile(t)
	built := map[string]bool{}
	var stages []string
	user := ""
	for _, l := range lines {
		word, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			stages = append(stages, rest)
			user = ""
		case "USER":
			user = strings.TrimSpace(rest)
		case "RUN":
			if strings.Contains(rest, "go build") {
				for _, p := range cmdPath.FindAllString(rest, -1) {
					built[p] = true
				}
			}
		case "ENV", "ARG":
			if strings.Contains(rest, "SLIP_") || secretLike.MatchString(strings.ToUpper(rest)) {
				t.Errorf("Dockerfile: %s bakes a setting or secret into the image; settings come at run time", l)
			}
		}
	}
	for _, c := range append(makeCmds(t), "./deploy/cmd/probe") {
		if !built[c] {
			t.Errorf("Dockerfile does not build %s", c)
		}
	}
	for c := range built {
		if _, err := os.Stat(filepath.Join(root, c, "main.go")); err != nil {
			t.Errorf("Dockerfile builds %s, which is no command: %v", c, err)
		}
	}
	if len(stages) < 2 || strings.Contains(stages[len(stages)-1], "golang") {
		t.Errorf("Dockerfile: the runtime stage must be a small image, not the build image: %q", stages)
	}
	if uid, _, _ := strings.Cut(user, ":"); user == "" || uid == "0" || uid == "root" {
		t.Errorf("Dockerfile: the runtime stage runs as %q; it must set a non-root USER", user)
	}
}
