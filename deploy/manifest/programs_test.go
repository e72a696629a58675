package manifest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/api"
	core "github.com/slipverify/slipverify/core/config"
	"github.com/slipverify/slipverify/core/lib/envflag"
	dispatcher "github.com/slipverify/slipverify/dispatcher/config"
	edge "github.com/slipverify/slipverify/edge/config"
	usage "github.com/slipverify/slipverify/usage/config"
)

// root is the repository root, relative to this package.
const root = "../.."

// route is a path a program serves on one of its listeners, with the text
// that registers it in the program's source: the test fails when the
// program stops serving it, so a probe cannot point at a path that is gone.
type route struct {
	path, file, registration string
}

// program is a tier as the deployment files run it.
type program struct {
	name string
	vars []envflag.Var
	// validate loads the program's configuration from args and env as the
	// program does at start, and validates it.
	validate func(args []string, env map[string]string) error
	// listeners maps each listener variable to the routes it serves.
	listeners map[string][]route
	// health is the listener and path that tell the program is healthy (and
	// its dependencies reachable), ready those that tell an orchestrator to
	// send it requests; ready is health where they are empty.
	healthVar, healthPath string
	readyVar, readyPath   string
	// grace is how long the program takes after SIGTERM at most, besides
	// drainVar's value when it has one.
	grace    int
	drainVar string
}

func getenv(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

var programs = map[string]*program{
	"core": {
		name: "core", vars: core.Vars(),
		validate: func(args []string, env map[string]string) error {
			c, err := core.Load(args, getenv(env))
			if err != nil {
				return err
			}
			return c.Validate()
		},
		listeners: map[string][]route{
			"SLIP_CORE_ADDR": {
				{"/health", "core/server/server.go", `r.GET("/health", s.health)`},
				{"/ready", "core/server/server.go", `r.GET("/ready", s.ready)`},
				{"/metrics", "core/server/server.go", `r.GET("/metrics", s.writeMetrics)`},
			},
			"SLIP_ADMIN_ADDR": {{"/admin/v1/services", "core/admin/admin.go", `r.GET(p+"/services", read(a.listServices))`}},
		},
		healthVar: "SLIP_CORE_ADDR", healthPath: "/health", grace: 23, drainVar: "SLIP_CORE_DRAIN", // fetch + bank timeouts + 5 s
		// Ready while it takes new requests: /ready fails from SIGTERM on,
		// while core drains, so that the edges and Services move off it.
		readyVar: "SLIP_CORE_ADDR", readyPath: "/ready",
	},
	"edge": {
		name: "edge", vars: edge.Vars(),
		validate: func(args []string, env map[string]string) error {
			c, err := edge.Load(args, getenv(env))
			if err != nil {
				return err
			}
			return c.Validate()
		},
		listeners: map[string][]route{
			"SLIP_EDGE_ADDR": {{"/health", "edge/gateway/routes.go", `{Method: "GET", Path: "/health", Version: api.V2, local: true}`}},
			// The metrics listener answers /ready, and every other path with
			// the metrics.
			"SLIP_EDGE_METRICS_ADDR": {
				{"/ready", "edge/cmd/edge/run.go", `string(c.Path()) == "/ready"`},
				{"/metrics", "edge/cmd/edge/run.go", `metrics.WritePrometheus(c)`},
			},
		},
		healthVar: "SLIP_EDGE_ADDR", healthPath: "/health", grace: 31, drainVar: "SLIP_EDGE_DRAIN", // core timeout + 1 s
		// Ready while it serves, core up or not: it answers for core.
		readyVar: "SLIP_EDGE_METRICS_ADDR", readyPath: "/ready",
	},
	"dispatcher": {
		name: "dispatcher", vars: dispatcher.Vars(),
		validate: func(args []string, env map[string]string) error {
			c, err := dispatcher.Load(args, getenv(env))
			if err != nil {
				return err
			}
			return c.Validate()
		},
		listeners: map[string][]route{
			"SLIP_DISPATCHER_ADDR": {
				{"/health", "dispatcher/cmd/dispatcher/main.go", `mux.HandleFunc("GET /health"`},
				{"/metrics", "dispatcher/cmd/dispatcher/main.go", `mux.HandleFunc("GET /metrics"`},
			},
		},
		healthVar: "SLIP_DISPATCHER_ADDR", healthPath: "/health", grace: 16, // stream.Grace and the last commit
	},
	"usage": {
		name: "usage", vars: usage.Vars(),
		validate: func(args []string, env map[string]string) error {
			c, err := usage.Load("usage", args, getenv(env))
			if err != nil {
				return err
			}
			return c.Validate()
		},
		listeners: map[string][]route{
			"SLIP_USAGE_ADDR": {
				{"/health", "usage/cmd/usage/run.go", `mux.HandleFunc("GET /health"`},
				{"/metrics", "usage/cmd/usage/run.go", `mux.HandleFunc("GET /metrics"`},
			},
		},
		healthVar: "SLIP_USAGE_ADDR", healthPath: "/health", grace: 10,
	},
}

// ready returns the listener variable and path of p's readiness check.
func (p *program) ready() (string, string) {
	if p.readyVar == "" {
		return p.healthVar, p.healthPath
	}
	return p.readyVar, p.readyPath
}

// TestRoutesExist: every route the probes may use is registered in its
// program's source.
func TestRoutesExist(t *testing.T) {
	for _, p := range programs {
		if _, ok := p.listeners[p.healthVar]; !ok {
			t.Errorf("%s: health listener %s is not a listener", p.name, p.healthVar)
		}
		for v, routes := range p.listeners {
			if p.variable(v) == nil {
				t.Errorf("%s does not read its listener variable %s", p.name, v)
			}
			for _, r := range routes {
				src, err := os.ReadFile(filepath.Join(root, r.file))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(src), r.registration) {
					t.Errorf("%s: %s no longer registers %s (%q not found): update the probes and this table", p.name, r.file, r.path, r.registration)
				}
			}
		}
	}
}

func (p *program) variable(env string) *envflag.Var {
	for i := range p.vars {
		if p.vars[i].Env == env {
			return &p.vars[i]
		}
	}
	return nil
}

// serves reports whether the program serves path on the listener port.
func (p *program) serves(env map[string]string, port int, path string) bool {
	for v, routes := range p.listeners {
		if listenPort(p.value(env, v)) != port {
			continue
		}
		for _, r := range routes {
			if r.path == path {
				return true
			}
		}
	}
	return false
}

// listenerPorts returns the ports the program listens on with env.
func (p *program) listenerPorts(env map[string]string) map[int]string {
	out := map[int]string{}
	for v := range p.listeners {
		if n := listenPort(p.value(env, v)); n > 0 {
			out[n] = v
		}
	}
	return out
}

// value is the setting v takes with env: its value there, else the
// program's default (as envflag does: an empty value means the default).
func (p *program) value(env map[string]string, v string) string {
	if s := env[v]; s != "" {
		return s
	}
	if d := p.variable(v); d != nil {
		return d.Default
	}
	return ""
}

// isAddrVar reports whether v holds host:port addresses (its default is
// a list of them).
func isAddrVar(v envflag.Var) bool {
	if v.Default == "" {
		return false
	}
	for _, hp := range strings.Split(v.Default, ",") {
		if listenPort(strings.TrimSpace(hp)) == 0 {
			return false
		}
	}
	return true
}

func listenPort(addr string) int {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secretLike names the settings that must come from the operator's secrets,
// never from a file in the repository.
var secretLike = regexp.MustCompile(`TOKEN|KEY|PASSWORD|SECRET`)

// operatorValues stand in for what the operator provides (a Kubernetes
// Secret, the compose env file): valid values of the right shape, so that
// the programs' validation runs on the whole configuration.
var operatorValues = map[string]string{
	"SLIP_EDGE_TOKEN":          strings.Repeat("t", 64),
	"SLIP_MASTER_KEY":          strings.Repeat("ab", 32),
	"SLIP_ADMIN_TOKEN":         strings.Repeat("a", 40),
	"SLIP_CLICKHOUSE_PASSWORD": "operator-password",
	"SLIP_BANK_URL":            "https://bank-gateway.example",
	"SLIP_SEED_FILE":           "/srv/slipverify/seed.json",
	"SLIP_TRUSTED_PROXIES":     "",
	"SLIP_POSTGRES_PASSWORD":   "operator-password",
	"SLIP_STORE":               "postgres://slip:operator-password@pg-0.postgres.svc:5432,pg-1.postgres.svc:5432/slip?target_session_attrs=read-write&pool_max_conns=16",
}

// container is one program's container in a deployment file, reduced to
// what the checks need.
type container struct {
	where   string // for messages: the file and the service or workload
	program *program
	args    []string          // the program's arguments (after its name)
	env     map[string]string // every variable set, secrets filled in
	secret  map[string]bool   // variables that come from the operator's secrets
	mounts  []string          // mount paths
	// closed is true when every host the container reaches must be
	// defined in the same file (compose), false when some are outside
	// (Kubernetes: the Kafka and ClickHouse clusters).
	closed bool
	// upstream resolves a host:port the container connects to: whether the
	// host is known to the file, and if it runs a program, which, with the
	// container port the connection reaches.
	upstream func(hostport string) (known bool, target *program, targetEnv map[string]string, port int)
}

// checkProgram holds one container to its program's configuration:
// every SLIP_* variable set is one the program reads; the configuration
// validates as the program validates it at start; listeners bind every
// interface; every setting whose default is a loopback address is set to a
// reachable one; the data directory and the seed file are mounted;
// connections to the other tiers reach their listeners; secrets come from
// the operator.
func checkProgram(t *testing.T, c container) {
	t.Helper()
	p := c.program
	for k := range c.env {
		if strings.HasPrefix(k, "SLIP_") && p.variable(k) == nil {
			t.Errorf("%s: sets %s, which %s does not read", c.where, k, p.name)
		}
	}
	for k := range c.env {
		if secretLike.MatchString(k) && strings.HasPrefix(k, "SLIP_") && !c.secret[k] {
			t.Errorf("%s: %s is written in the file; it must come from the operator's secrets", c.where, k)
		}
	}
	if err := p.validate(c.args, c.env); err != nil {
		t.Errorf("%s: %s refuses its configuration: %v", c.where, p.name, err)
	}
	for _, v := range p.vars {
		val := p.value(c.env, v.Env)
		if _, listener := p.listeners[v.Env]; listener {
			host, _, err := net.SplitHostPort(val)
			if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
				t.Errorf("%s: %s=%q must listen on every interface (0.0.0.0:port) to be reachable in a container", c.where, v.Env, val)
			}
			continue
		}
		for _, hp := range strings.Split(val, ",") {
			host, _, err := net.SplitHostPort(strings.TrimSpace(hp))
			if err != nil || !isLoopback(host) {
				continue
			}
			t.Errorf("%s: %s=%q is a loopback address (the program's default); set it to the service it names", c.where, v.Env, val)
		}
	}
	for _, v := range []string{"SLIP_DATA_DIR", "SLIP_SEED"} {
		if p.variable(v) == nil {
			continue
		}
		if v == "SLIP_DATA_DIR" && p.name == "core" && c.env["SLIP_STORE"] != "" {
			continue // core on PostgreSQL keeps no file
		}
		path := p.value(c.env, v)
		if !filepath.IsAbs(path) || !mounted(c.mounts, path) {
			t.Errorf("%s: %s=%q is not on a mounted volume (mounts %v)", c.where, v, path, c.mounts)
		}
	}
	// Connections to another tier reach one of its listeners.
	for _, v := range p.vars {
		if _, listener := p.listeners[v.Env]; listener || !isAddrVar(v) {
			continue
		}
		val := p.value(c.env, v.Env)
		for _, hp := range strings.Split(val, ",") {
			hp = strings.TrimSpace(hp)
			if _, _, err := net.SplitHostPort(hp); err != nil {
				continue
			}
			known, target, targetEnv, port := c.upstream(hp)
			switch {
			case target != nil && port <= 0:
				t.Errorf("%s: %s=%s names no port of %s's service", c.where, v.Env, hp, target.name)
			case target != nil:
				if _, ok := target.listenerPorts(targetEnv)[port]; !ok {
					t.Errorf("%s: %s=%s reaches %s on port %d, where it does not listen (it listens on %v)", c.where, v.Env, hp, target.name, port, target.listenerPorts(targetEnv))
				}
			case !known && (c.closed || v.Env == "SLIP_CORE_ADDR"):
				t.Errorf("%s: %s=%s names no service of the file", c.where, v.Env, hp)
			}
		}
	}
}

// mounted reports whether path is at or under one of mounts.
func mounted(mounts []string, path string) bool {
	for _, m := range mounts {
		m = strings.TrimSuffix(m, "/")
		if path == m || strings.HasPrefix(path, m+"/") {
			return true
		}
	}
	return false
}

// topic is one kafka-topics.sh --create of a deployment file.
type topic struct {
	name                    string
	partitions, replication int
	config                  map[string]string
}

// parseTopics reads every `kafka-topics.sh ... --create` line of a script.
func parseTopics(t *testing.T, script string) map[string]topic {
	t.Helper()
	out := map[string]topic{}
	for _, line := range strings.Split(script, "\n") {
		f := strings.Fields(line)
		if !contains(f, "--create") {
			continue
		}
		tp := topic{config: map[string]string{}}
		for i := 0; i+1 < len(f); i++ {
			switch f[i] {
			case "--topic":
				tp.name = f[i+1]
			case "--partitions":
				tp.partitions, _ = strconv.Atoi(f[i+1])
			case "--replication-factor":
				tp.replication, _ = strconv.Atoi(f[i+1])
			case "--config":
				k, v, _ := strings.Cut(f[i+1], "=")
				tp.config[k] = v
			}
		}
		if _, dup := out[tp.name]; dup {
			t.Errorf("topic %s is created twice", tp.name)
		}
		out[tp.name] = tp
	}
	return out
}

// checkTopics: the topics created are exactly api.Topics, each with
// partitions, a retention, the replication factor and min.insync.replicas
// wanted, and min.insync.replicas below the replication factor unless
// there is one broker.
func checkTopics(t *testing.T, where string, got map[string]topic, replication, minISR int) {
	t.Helper()
	var names []string
	for n := range got {
		names = append(names, n)
	}
	want := append([]string(nil), api.Topics...)
	sort.Strings(names)
	sort.Strings(want)
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("%s: creates topics %v, the platform uses %v", where, names, want)
	}
	for _, tp := range got {
		if tp.partitions < 1 {
			t.Errorf("%s: %s has no partition count", where, tp.name)
		}
		// slip.nonces is read back 2×5m1s + SLIP_EDGE_NONCE_MARGIN (1m) at
		// an edge's start, and kept no longer than needed; the others an hour at least.
		minMS, what := int64(3_600_000), "at least an hour"
		if tp.name == api.TopicNonces {
			minMS, what = 12*60_000, "at least 12 minutes: twice the timestamp window and the replay margin"
		}
		if ms, err := strconv.ParseInt(tp.config["retention.ms"], 10, 64); err != nil || ms < minMS {
			t.Errorf("%s: %s: retention.ms %q (%s)", where, tp.name, tp.config["retention.ms"], what)
		}
		if tp.replication != replication {
			t.Errorf("%s: %s: replication factor %d, want %d", where, tp.name, tp.replication, replication)
		}
		if tp.config["min.insync.replicas"] != strconv.Itoa(minISR) {
			t.Errorf("%s: %s: min.insync.replicas %q, want %d", where, tp.name, tp.config["min.insync.replicas"], minISR)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
