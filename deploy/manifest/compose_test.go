package manifest

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gopkg.in/yaml.v3"

	"github.com/slipverify/slipverify/core/lib/envflag"
)

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	Build       struct {
		Args map[string]string `yaml:"args"`
	} `yaml:"build"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn       map[string]struct{ Condition string } `yaml:"depends_on"`
	StopGracePeriod string                                `yaml:"stop_grace_period"`
	Deploy          struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
}

// composeSets are the ways compose runs the platform: compose.yaml alone
// (core on bbolt), and with the override compose.postgres.yaml (two cores
// on PostgreSQL).
var composeSets = [][]string{
	{"deploy/compose.yaml"},
	{"deploy/compose.yaml", "deploy/compose.postgres.yaml"},
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	return readComposeFiles(t, composeSets[0])
}

// readComposeFiles reads compose files as `docker compose -f ... -f ...`
// merges them (mergeCompose).
func readComposeFiles(t *testing.T, files []string) composeFile {
	t.Helper()
	var merged *yaml.Node
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if merged == nil {
			merged = doc.Content[0]
			continue
		}
		merged = mergeCompose("", merged, doc.Content[0])
	}
	var f composeFile
	if err := merged.Decode(&f); err != nil {
		t.Fatal(err)
	}
	return f
}

// mergeCompose merges an override file's node onto the one before, as
// compose does: mappings key by key; a value tagged !override replaces,
// !reset removes; sequences are appended (volumes, ports), but for
// command, entrypoint and a health check's test, which replace; anything
// else replaces.
func mergeCompose(key string, dst, src *yaml.Node) *yaml.Node {
	switch {
	case src.Tag == "!reset":
		return nil
	case src.Tag == "!override":
		src.Tag = ""
		return src
	case dst == nil:
		return src
	case dst.Kind == yaml.MappingNode && src.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(src.Content); i += 2 {
			k, v := src.Content[i], src.Content[i+1]
			j := -1
			for n := 0; n+1 < len(dst.Content); n += 2 {
				if dst.Content[n].Value == k.Value {
					j = n
				}
			}
			var old *yaml.Node
			if j >= 0 {
				old = dst.Content[j+1]
			}
			m := mergeCompose(k.Value, old, v)
			switch {
			case m == nil && j >= 0:
				dst.Content = slices.Delete(dst.Content, j, j+2)
			case m == nil:
			case j >= 0:
				dst.Content[j+1] = m
			default:
				dst.Content = append(dst.Content, k, m)
			}
		}
		return dst
	case dst.Kind == yaml.SequenceNode && src.Kind == yaml.SequenceNode && !slices.Contains([]string{"command", "entrypoint", "test"}, key):
		dst.Content = append(dst.Content, src.Content...)
		return dst
	default:
		return src
	}
}

var interpolation = regexp.MustCompile(`\$\{([A-Z0-9_]+)(?:(:\?|:-)([^}]*))?\}`)

// interpolate resolves compose's ${NAME:?message} (a required value of the
// operator's env file), ${NAME:-default} (an optional one) and $$. refs are
// the names it read from the env file.
func interpolate(t *testing.T, where, s string) (out string, refs []string) {
	t.Helper()
	out = interpolation.ReplaceAllStringFunc(s, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		name, op, arg := sub[1], sub[2], sub[3]
		refs = append(refs, name)
		switch op {
		case ":?":
			v, ok := operatorValues[name]
			if !ok {
				t.Errorf("%s: ${%s} has no test value; add one to operatorValues", where, name)
			}
			return v
		case ":-":
			return arg
		default:
			t.Errorf("%s: ${%s} is empty when the env file lacks it; write ${%s:?message} or ${%s:-default}", where, name, name, name)
			return ""
		}
	})
	return strings.ReplaceAll(out, "$$", "$"), refs
}

// composeProgram returns the program a service runs: the project's image
// and the program named by its command.
func composeProgram(s composeService) *program {
	if !strings.HasPrefix(s.Image, "slipverify:") || len(s.Command) == 0 {
		return nil
	}
	return programs[s.Command[0]]
}

// TestCompose holds every tier of compose.yaml, alone and with
// compose.postgres.yaml, to its program: the variables it sets, the
// configuration the program validates, listeners, volumes, connections to
// other services, the health check (the image's probe on the program's
// health route), the stop grace, start order after the topics exist; core
// on bbolt one replica, on PostgreSQL several, started after the database
// is healthy. secrets.env.example lists what the files read.
func TestCompose(t *testing.T) {
	refs := map[string]bool{}
	for _, files := range composeSets {
		t.Run(strings.Join(files, "+"), func(t *testing.T) { testCompose(t, readComposeFiles(t, files), refs) })
	}

	// The operator's env file documents exactly the variables compose reads.
	example, err := envflag.ReadEnvFile(filepath.Join(root, "deploy/secrets.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	var missing, extra []string
	for n := range refs {
		if _, ok := example[n]; !ok {
			missing = append(missing, n)
		}
	}
	for n, v := range example {
		if !refs[n] {
			extra = append(extra, n)
		}
		if secretLike.MatchString(n) && v != "" {
			t.Errorf("secrets.env.example: %s has a value; the example must hold none", n)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("secrets.env.example lacks %v that the compose files read, and lists %v that they do not", missing, extra)
	}
}

func testCompose(t *testing.T, f composeFile, refs map[string]bool) {
	envs := map[string]map[string]string{}
	for name, s := range f.Services {
		env := map[string]string{}
		for k, v := range s.Environment {
			val, r := interpolate(t, "compose "+name, v)
			env[k] = val
			for _, n := range r {
				refs[n] = true
			}
		}
		envs[name] = env
		for _, v := range append(append(append([]string{s.Image}, s.Volumes...), s.Ports...), slices.Collect(maps.Values(s.Build.Args))...) {
			_, r := interpolate(t, "compose "+name, v)
			for _, n := range r {
				refs[n] = true
			}
		}
	}
	seen := map[string]bool{}
	for name, s := range f.Services {
		p := composeProgram(s)
		if p == nil {
			continue
		}
		seen[p.name] = true
		where := "compose service " + name
		env := envs[name]
		secret := map[string]bool{}
		for k, v := range s.Environment {
			if interpolation.MatchString(v) {
				secret[k] = true
			}
		}
		var mounts []string
		for _, v := range s.Volumes {
			val, _ := interpolate(t, where, v)
			parts := strings.Split(val, ":")
			if len(parts) < 2 {
				t.Errorf("%s: volume %q has no mount path", where, v)
				continue
			}
			mounts = append(mounts, parts[1])
			if named := parts[0]; !strings.HasPrefix(named, "/") && !strings.HasPrefix(named, ".") {
				if _, ok := f.Volumes[named]; !ok {
					t.Errorf("%s: volume %s is not declared", where, named)
				}
			}
		}
		checkProgram(t, container{
			where: where, program: p, args: s.Command[1:], env: env, secret: secret, mounts: mounts, closed: true,
			upstream: func(hp string) (bool, *program, map[string]string, int) {
				host, port := splitHostPort(hp)
				other, ok := f.Services[host]
				if !ok {
					return false, nil, nil, 0
				}
				return true, composeProgram(other), envs[host], port
			},
		})

		// The health check: the image's probe on the health route.
		wantURL := fmt.Sprintf("http://127.0.0.1:%d%s", listenPort(p.value(env, p.healthVar)), p.healthPath)
		if got := s.Healthcheck.Test; fmt.Sprint(got) != fmt.Sprint([]string{"CMD", "probe", wantURL}) {
			t.Errorf("%s: healthcheck %q, want [CMD probe %s]", where, got, wantURL)
		}

		// Stop grace: the program's drain and shutdown fit in it.
		need := time.Duration(p.grace) * time.Second
		if p.drainVar != "" {
			d, err := time.ParseDuration(p.value(env, p.drainVar))
			if err != nil {
				t.Fatal(err)
			}
			need += d
		}
		if g, err := time.ParseDuration(s.StopGracePeriod); err != nil || g <= need {
			t.Errorf("%s: stop_grace_period %q, want more than %v", where, s.StopGracePeriod, need)
		}

		// Only the edge is published, on its listener.
		for _, pm := range s.Ports {
			val, _ := interpolate(t, where, pm)
			parts := strings.Split(val, ":")
			cport, _ := strconv.Atoi(parts[len(parts)-1])
			if p.name != "edge" || cport != listenPort(p.value(env, "SLIP_EDGE_ADDR")) {
				t.Errorf("%s: publishes %q; only the edge's listener may be published", where, pm)
			}
		}
		if p.name == "edge" && len(s.Ports) == 0 {
			t.Errorf("%s: the edge is not published", where)
		}

		// Programs that use Kafka start after the topics were created.
		if _, ok := env["SLIP_KAFKA_ADDR"]; ok && !dependsOn(f, name, "kafka-topics", "service_completed_successfully", map[string]bool{}) {
			t.Errorf("%s: uses Kafka but does not start after kafka-topics completed", where)
		}

		// Core: on bbolt one process holds core.db; on PostgreSQL several
		// share the database, which they wait for.
		if p.name == "core" {
			replicas := 1
			if s.Deploy.Replicas != nil {
				replicas = *s.Deploy.Replicas
			}
			store := env["SLIP_STORE"]
			switch {
			case store == "" && replicas != 1:
				t.Errorf("%s: %d replicas of core on bbolt; one process holds core.db", where, replicas)
			case store != "" && replicas < 2:
				t.Errorf("%s: core on PostgreSQL runs one replica; run two or more", where)
			case store != "" && !secret["SLIP_STORE"]:
				t.Errorf("%s: SLIP_STORE holds the database's password: take it from the env file", where)
			}
			if store != "" {
				pc, err := pgconn.ParseConfig(store)
				if err != nil {
					t.Fatalf("%s: SLIP_STORE: %v", where, err)
				}
				hosts := []string{pc.Host}
				for _, fb := range pc.Fallbacks {
					hosts = append(hosts, fb.Host)
				}
				for _, h := range hosts {
					if _, ok := f.Services[h]; !ok {
						t.Errorf("%s: SLIP_STORE names %s, no service of the file", where, h)
					} else if !dependsOn(f, name, h, "service_healthy", map[string]bool{}) {
						t.Errorf("%s: does not start after %s is healthy", where, h)
					}
				}
			}
		}
	}
	for name := range programs {
		if !seen[name] {
			t.Errorf("compose does not run %s", name)
		}
	}
	for name, s := range f.Services {
		if composeProgram(s) == nil && len(s.Ports) > 0 {
			t.Errorf("compose service %s publishes ports; only the edge may", name)
		}
	}
}

// dependsOn reports whether service waits, directly or through the services
// it waits for, for dep to reach condition.
func dependsOn(f composeFile, service, dep, condition string, visited map[string]bool) bool {
	if visited[service] {
		return false
	}
	visited[service] = true
	for d, c := range f.Services[service].DependsOn {
		if d == dep && c.Condition == condition {
			return true
		}
		if dependsOn(f, d, dep, condition, visited) {
			return true
		}
	}
	return false
}

// TestComposeTopics: kafka-topics creates exactly the platform's topics on
// the single broker (one replica each).
func TestComposeTopics(t *testing.T) {
	f := readCompose(t)
	s, ok := f.Services["kafka-topics"]
	if !ok {
		t.Fatal("compose.yaml has no kafka-topics service")
	}
	checkTopics(t, "compose kafka-topics", parseTopics(t, strings.Join(s.Command, "\n")), 1, 1)
}

func splitHostPort(hp string) (string, int) {
	i := strings.LastIndex(hp, ":")
	if i < 0 {
		return hp, 0
	}
	n, _ := strconv.Atoi(hp[i+1:])
	return hp[:i], n
}
