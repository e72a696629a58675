package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slipverify/slipverify/core/api"
)

const k8sDir = "deploy/k8s"

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type httpProbe struct {
	HTTPGet *struct {
		Path string    `yaml:"path"`
		Port yaml.Node `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	EnvFrom []struct {
		ConfigMapRef *struct{ Name string } `yaml:"configMapRef"`
		SecretRef    *struct{ Name string } `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef    *struct{ Name, Key string } `yaml:"secretKeyRef"`
			ConfigMapKeyRef *struct{ Name, Key string } `yaml:"configMapKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *httpProbe `yaml:"readinessProbe"`
	LivenessProbe  *httpProbe `yaml:"livenessProbe"`
	StartupProbe   *httpProbe `yaml:"startupProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []k8sContainer `yaml:"containers"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type workload struct {
	Kind     string `yaml:"kind"`
	Metadata meta   `yaml:"metadata"`
	Spec     struct {
		Replicas *int          `yaml:"replicas"`
		Selector labelSelector `yaml:"selector"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
		VolumeClaimTemplates []struct {
			Metadata meta `yaml:"metadata"`
		} `yaml:"volumeClaimTemplates"`
	} `yaml:"spec"`
}

type service struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
		Ports                    []struct {
			Name       string    `yaml:"name"`
			Port       int       `yaml:"port"`
			TargetPort yaml.Node `yaml:"targetPort"`
		} `yaml:"ports"`
	} `yaml:"spec"`
}

type pdb struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		MaxUnavailable yaml.Node     `yaml:"maxUnavailable"`
		Selector       labelSelector `yaml:"selector"`
	} `yaml:"spec"`
}

type ingress struct {
	Metadata meta `yaml:"metadata"`
	Spec     struct {
		Rules []struct {
			HTTP struct {
				Paths []struct {
					Backend struct {
						Service struct {
							Name string `yaml:"name"`
							Port struct {
								Name   string `yaml:"name"`
								Number int    `yaml:"number"`
							} `yaml:"port"`
						} `yaml:"service"`
					} `yaml:"backend"`
				} `yaml:"paths"`
			} `yaml:"http"`
		} `yaml:"rules"`
	} `yaml:"spec"`
}

// cluster is every object of the manifests, by kind and name.
type cluster struct {
	configMaps map[string]map[string]string
	services   map[string]service
	workloads  []workload // Deployments and StatefulSets
	jobs       []workload
	pdbs       []pdb
	ingresses  []ingress
	kinds      map[string]int
}

// layouts are the ways deploy/k8s runs core: as it is, on bbolt (one
// replica), and with the component postgres, on PostgreSQL (N replicas).
var layouts = []struct {
	name       string
	components []string // added to kustomization.yaml's
}{
	{"bbolt", nil},
	{"postgres", []string{"postgres"}},
}

// kustomization is what the tests read of a kustomization.yaml: resources
// that are files of its directory, components, and strategic merge patches
// given inline that delete an object or merge maps.
type kustomization struct {
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Components []string `yaml:"components"`
	Patches    []struct {
		Patch  string `yaml:"patch"`
		Path   string `yaml:"path"`
		Target any    `yaml:"target"`
	} `yaml:"patches"`
}

// object is one object of the manifests as YAML decodes it.
type object = map[string]any

// readKustomization reads dir's kustomization.yaml, of kind, and the
// objects of its resources, and checks that it lists every manifest of
// the directory.
func readKustomization(t *testing.T, dir, kind string) (kustomization, []object) {
	t.Helper()
	var k kustomization
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if k.Kind != kind {
		t.Errorf("%s/kustomization.yaml: kind %q, want %s", dir, k.Kind, kind)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !contains(k.Resources, base) {
			t.Errorf("%s/kustomization.yaml does not list %s", dir, base)
		}
	}
	var objs []object
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatalf("%s: resource %s: %v (the tests read files of the directory only)", dir, r, err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o object
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			if o != nil {
				objs = append(objs, o)
			}
		}
	}
	return k, objs
}

// objectID is an object's kind and name.
func objectID(o object) string {
	name, _ := o["metadata"].(object)["name"].(string)
	return fmt.Sprint(o["kind"], "/", name)
}

// patch applies one inline strategic merge patch as kustomize does, for
// the two forms the manifests use: `$patch: delete` removes the object,
// and maps merge, a null removing the key. A list in a patch would need
// strategic merge's keys: it fails the test instead.
func patch(t *testing.T, where string, objs []object, text string) []object {
	t.Helper()
	var p object
	if err := yaml.Unmarshal([]byte(text), &p); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	id := objectID(p)
	i := slices.IndexFunc(objs, func(o object) bool { return objectID(o) == id })
	if i < 0 {
		t.Fatalf("%s: patch of %s, which no resource defines", where, id)
	}
	if p["$patch"] == "delete" {
		return slices.Delete(objs, i, i+1)
	}
	var merge func(path string, dst, src object)
	merge = func(path string, dst, src object) {
		for k, v := range src {
			switch v := v.(type) {
			case nil:
				delete(dst, k)
			case object:
				d, ok := dst[k].(object)
				if !ok {
					d = object{}
					dst[k] = d
				}
				merge(path+"."+k, d, v)
			case []any:
				t.Fatalf("%s: patch of %s sets the list %s%s; the tests merge maps only", where, id, path, k)
			default:
				dst[k] = v
			}
		}
	}
	merge("", objs[i], p)
	return objs
}

// buildObjects returns the objects kustomize makes of deploy/k8s with
// components added to its own.
func buildObjects(t *testing.T, components []string) []object {
	t.Helper()
	dir := filepath.Join(root, k8sDir)
	k, objs := readKustomization(t, dir, "Kustomization")
	for _, c := range append(k.Components, components...) {
		ck, cobjs := readKustomization(t, filepath.Join(dir, c), "Component")
		objs = append(objs, cobjs...)
		objs = applyPatches(t, c, ck, objs)
	}
	return applyPatches(t, ".", k, objs)
}

func applyPatches(t *testing.T, where string, k kustomization, objs []object) []object {
	t.Helper()
	for i, p := range k.Patches {
		if p.Path != "" || p.Target != nil || p.Patch == "" {
			t.Fatalf("%s: patch %d: the tests read inline strategic merge patches only (patch:, no target)", where, i)
		}
		objs = patch(t, fmt.Sprintf("%s: patch %d", where, i), objs, p.Patch)
	}
	return objs
}

// readCluster reads deploy/k8s as kustomize builds it with components.
func readCluster(t *testing.T, components []string) *cluster {
	t.Helper()
	c := &cluster{configMaps: map[string]map[string]string{}, services: map[string]service{}, kinds: map[string]int{}}
	for _, o := range buildObjects(t, components) {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		r := objectID(o)
		var head struct {
			Kind     string `yaml:"kind"`
			Metadata meta   `yaml:"metadata"`
			Data     map[string]string
		}
		decode := func(v any) {
			if err := yaml.Unmarshal(b, v); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
		}
		decode(&head)
		c.kinds[head.Kind]++
		switch head.Kind {
		case "ConfigMap":
			c.configMaps[head.Metadata.Name] = head.Data
		case "Service":
			var s service
			decode(&s)
			c.services[s.Metadata.Name] = s
		case "Deployment", "StatefulSet":
			var w workload
			decode(&w)
			c.workloads = append(c.workloads, w)
		case "Job":
			var w workload
			decode(&w)
			c.jobs = append(c.jobs, w)
		case "PodDisruptionBudget":
			var p pdb
			decode(&p)
			c.pdbs = append(c.pdbs, p)
		case "Ingress":
			var i ingress
			decode(&i)
			c.ingresses = append(c.ingresses, i)
		}
	}
	return c
}

// TestKustomizeAgrees: where kubectl is installed, kustomize's own build
// of each layout has the objects the tests read, and the same settings.
func TestKustomizeAgrees(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "k8s")
			if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, k8sDir))); err != nil {
				t.Fatal(err)
			}
			if len(l.components) > 0 {
				f, err := os.OpenFile(filepath.Join(dir, "kustomization.yaml"), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(f, "components: [%s]\n", strings.Join(l.components, ", "))
				f.Close()
			}
			out, err := exec.Command(kubectl, "kustomize", dir).Output()
			if err != nil {
				t.Fatalf("kubectl kustomize: %v", err)
			}
			settings := func(objs []object) map[string]string {
				m := map[string]string{}
				for _, o := range objs {
					m[objectID(o)] = ""
					if o["kind"] == "ConfigMap" {
						m[objectID(o)] = fmt.Sprint(o["data"])
					}
				}
				return m
			}
			var built []object
			dec := yaml.NewDecoder(bytes.NewReader(out))
			for {
				var o object
				if err := dec.Decode(&o); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatal(err)
				}
				built = append(built, o)
			}
			if got, want := settings(built), settings(buildObjects(t, l.components)); !maps.Equal(got, want) {
				t.Errorf("kustomize builds %v,\nthe tests read %v", got, want)
			}
		})
	}
}

// k8sProgram returns the program a container runs: the project's image and
// the program named by its arguments.
func k8sProgram(c k8sContainer) *program {
	if c.Image != "slipverify" && !strings.HasPrefix(c.Image, "slipverify:") || len(c.Args) == 0 {
		return nil
	}
	return programs[c.Args[0]]
}

// env returns a container's environment with the operator's secrets
// filled in, and which variables came from Secrets.
func (cl *cluster) env(t *testing.T, where string, c k8sContainer) (env map[string]string, secret map[string]bool) {
	env, secret = map[string]string{}, map[string]bool{}
	for _, ef := range c.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			data, ok := cl.configMaps[ef.ConfigMapRef.Name]
			if !ok {
				t.Errorf("%s: ConfigMap %s does not exist", where, ef.ConfigMapRef.Name)
			}
			for k, v := range data {
				env[k] = v
			}
		case ef.SecretRef != nil:
			t.Errorf("%s: envFrom a whole Secret; name each variable with secretKeyRef", where)
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			v, ok := operatorValues[e.ValueFrom.SecretKeyRef.Key]
			if !ok {
				t.Errorf("%s: secret key %s has no test value; add one to operatorValues", where, e.ValueFrom.SecretKeyRef.Key)
			}
			env[e.Name], secret[e.Name] = v, true
		case e.ValueFrom.ConfigMapKeyRef != nil:
			v, ok := cl.configMaps[e.ValueFrom.ConfigMapKeyRef.Name][e.ValueFrom.ConfigMapKeyRef.Key]
			if !ok {
				t.Errorf("%s: %s: ConfigMap key %s/%s does not exist", where, e.Name, e.ValueFrom.ConfigMapKeyRef.Name, e.ValueFrom.ConfigMapKeyRef.Key)
			}
			env[e.Name] = v
		}
	}
	return env, secret
}

// containerPort resolves a probe's or Service's port (a number or a
// container port's name) to the container port number.
func containerPort(c k8sContainer, port yaml.Node) int {
	if n, err := strconv.Atoi(port.Value); err == nil {
		return n
	}
	for _, p := range c.Ports {
		if p.Name == port.Value {
			return p.ContainerPort
		}
	}
	return 0
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// programOf returns the workload whose pods a Service selects, with its
// first program container.
func (cl *cluster) programOf(s service) (*workload, *k8sContainer) {
	for i := range cl.workloads {
		w := &cl.workloads[i]
		if !selects(s.Spec.Selector, w.Spec.Template.Metadata.Labels) {
			continue
		}
		for j := range w.Spec.Template.Spec.Containers {
			if k8sProgram(w.Spec.Template.Spec.Containers[j]) != nil {
				return w, &w.Spec.Template.Spec.Containers[j]
			}
		}
	}
	return nil, nil
}

// serviceTarget resolves host:port through a Service of the manifests to
// the program behind it and the container port reached.
func (cl *cluster) serviceTarget(t *testing.T, hp string) (bool, *program, map[string]string, int) {
	host, port := splitHostPort(hp)
	name, rest, _ := strings.Cut(host, ".")
	if rest != "" && !strings.HasPrefix(rest, "slipverify.svc") {
		return false, nil, nil, 0 // another namespace: outside the manifests
	}
	s, ok := cl.services[name]
	if !ok {
		return false, nil, nil, 0
	}
	_, c := cl.programOf(s)
	if c == nil {
		return true, nil, nil, 0
	}
	env, _ := cl.env(t, "service "+name, *c)
	for _, sp := range s.Spec.Ports {
		if sp.Port == port {
			return true, k8sProgram(*c), env, containerPort(*c, sp.TargetPort)
		}
	}
	return true, k8sProgram(*c), env, 0
}

// TestKubernetes holds every program container of the manifests, in each
// layout, to its program (as TestCompose does) and to what running it on
// Kubernetes needs: probes on the program's listeners and routes (readiness
// on its readiness route), container ports that are its listeners, resource
// requests and limits, a PodDisruptionBudget, a non-root user, a grace
// period that fits the drain and shutdown, consumers no more numerous than
// their topic's partitions; core on bbolt as one StatefulSet replica with
// its data on a claim, core on PostgreSQL as a Deployment of several, its
// URL from a Secret, one core at a time disrupted, and the edges resolving
// a headless Service to every core.
func TestKubernetes(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { testKubernetes(t, readCluster(t, l.components)) })
	}
}

func testKubernetes(t *testing.T, cl *cluster) {
	if cl.kinds["Secret"] > 0 {
		t.Error("the manifests define a Secret; secrets are the operator's, created apart (README.md)")
	}
	topics := k8sTopics(t, cl)
	seen := map[string]bool{}
	var manyCores map[string]string // the pod labels of a core of several replicas
	var edgeCores []string          // each edge's SLIP_CORE_ADDR
	for _, w := range cl.workloads {
		pod := w.Spec.Template.Spec
		for _, c := range pod.Containers {
			p := k8sProgram(c)
			if p == nil {
				t.Errorf("%s %s: container %s runs no program of the platform", w.Kind, w.Metadata.Name, c.Name)
				continue
			}
			seen[p.name] = true
			where := w.Kind + " " + w.Metadata.Name
			env, secret := cl.env(t, where, c)
			var mounts []string
			for _, m := range c.VolumeMounts {
				mounts = append(mounts, m.MountPath)
			}
			checkProgram(t, container{
				where: where, program: p, args: c.Args[1:], env: env, secret: secret, mounts: mounts,
				upstream: func(hp string) (bool, *program, map[string]string, int) { return cl.serviceTarget(t, hp) },
			})

			listeners := p.listenerPorts(env)
			for _, cp := range c.Ports {
				if _, ok := listeners[cp.ContainerPort]; !ok {
					t.Errorf("%s: container port %d (%s) is none of %s's listeners %v", where, cp.ContainerPort, cp.Name, p.name, listeners)
				}
			}
			probe := func(kind string, pr *httpProbe, required bool) {
				if pr == nil || pr.HTTPGet == nil {
					if required {
						t.Errorf("%s: no HTTP %s probe", where, kind)
					}
					return
				}
				port := containerPort(c, pr.HTTPGet.Port)
				if !p.serves(env, port, pr.HTTPGet.Path) {
					t.Errorf("%s: %s probe GET %s on port %d: %s serves no such route there (listeners %v)", where, kind, pr.HTTPGet.Path, port, p.name, listeners)
				}
				if readyVar, readyPath := p.ready(); kind == "readiness" && (pr.HTTPGet.Path != readyPath || port != listenPort(p.value(env, readyVar))) {
					t.Errorf("%s: readiness probe GET %s on port %d, want %s's readiness route %s on %s", where, pr.HTTPGet.Path, port, p.name, readyPath, readyVar)
				}
			}
			probe("readiness", c.ReadinessProbe, true)
			probe("liveness", c.LivenessProbe, true)
			probe("startup", c.StartupProbe, false)

			for _, kind := range []string{"cpu", "memory"} {
				if c.Resources.Requests[kind] == "" || c.Resources.Limits[kind] == "" {
					t.Errorf("%s: no %s request and limit", where, kind)
				}
			}

			var need int
			if p.drainVar != "" {
				d, err := timeParse(p.value(env, p.drainVar))
				if err != nil {
					t.Fatal(err)
				}
				need = d
			}
			need += p.grace
			if g := pod.TerminationGracePeriodSeconds; g == nil || *g <= need {
				t.Errorf("%s: terminationGracePeriodSeconds must exceed %d s (drain and shutdown)", where, need)
			}

			switch p.name {
			case "core":
				if env["SLIP_STORE"] != "" {
					if !secret["SLIP_STORE"] {
						t.Errorf("%s: SLIP_STORE holds the database's password: take it from a Secret", where)
					}
					if w.Kind != "Deployment" || w.Spec.Replicas == nil || *w.Spec.Replicas < 2 {
						t.Errorf("%s: core on PostgreSQL must be a Deployment of two replicas or more", where)
					}
					for _, b := range cl.pdbs {
						if selects(b.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) && b.Spec.MaxUnavailable.Value != "1" {
							t.Errorf("%s: PodDisruptionBudget %s: maxUnavailable %q, want 1 (one core at a time)", where, b.Metadata.Name, b.Spec.MaxUnavailable.Value)
						}
					}
					manyCores = w.Spec.Template.Metadata.Labels
					break
				}
				if w.Kind != "StatefulSet" || w.Spec.Replicas == nil || *w.Spec.Replicas != 1 {
					t.Errorf("%s: core must be a StatefulSet of exactly one replica (one bbolt file, one process)", where)
				}
				dataDir := p.value(env, "SLIP_DATA_DIR")
				onClaim := false
				for _, m := range c.VolumeMounts {
					for _, vct := range w.Spec.VolumeClaimTemplates {
						if m.MountPath == dataDir && m.Name == vct.Metadata.Name {
							onClaim = true
						}
					}
				}
				if !onClaim {
					t.Errorf("%s: SLIP_DATA_DIR %s is not on a volume claim", where, dataDir)
				}
			case "dispatcher", "usage":
				tp := map[string]string{"dispatcher": api.TopicResults, "usage": api.TopicUsage}[p.name]
				if w.Spec.Replicas == nil || *w.Spec.Replicas > topics[tp].partitions {
					t.Errorf("%s: replicas beyond the %d partitions of %s would sit idle", where, topics[tp].partitions, tp)
				}
			case "edge":
				if w.Spec.Replicas == nil || *w.Spec.Replicas < 2 {
					t.Errorf("%s: run at least two edges", where)
				}
				edgeCores = append(edgeCores, p.value(env, "SLIP_CORE_ADDR"))
			}
		}
		if sc := pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
			t.Errorf("%s %s: pods must run as a non-root user", w.Kind, w.Metadata.Name)
		}
		if !selects(w.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) {
			t.Errorf("%s %s: its selector does not select its pods", w.Kind, w.Metadata.Name)
		}
		budgets := 0
		for _, b := range cl.pdbs {
			if selects(b.Spec.Selector.MatchLabels, w.Spec.Template.Metadata.Labels) {
				budgets++
			}
		}
		if budgets != 1 {
			t.Errorf("%s %s: %d PodDisruptionBudgets select its pods, want 1", w.Kind, w.Metadata.Name, budgets)
		}
	}
	for name := range programs {
		if !seen[name] {
			t.Errorf("the manifests do not run %s", name)
		}
	}
	// Several cores: each edge's SLIP_CORE_ADDR is a name that resolves
	// to every core pod (a headless Service), not one virtual address.
	for _, addrs := range edgeCores {
		for _, hp := range strings.Split(addrs, ",") {
			if manyCores == nil {
				break
			}
			host, _ := splitHostPort(strings.TrimSpace(hp))
			name, _, _ := strings.Cut(host, ".")
			s, ok := cl.services[name]
			if !ok || s.Spec.ClusterIP != "None" || !selects(s.Spec.Selector, manyCores) {
				t.Errorf("edge: SLIP_CORE_ADDR %s is not a headless Service of the cores: the edges would see one address, not every core", hp)
			}
		}
	}
	for name, s := range cl.services {
		if w, _ := cl.programOf(s); w == nil {
			t.Errorf("Service %s selects no program's pods", name)
		}
	}
}

// TestIngressHashesOnKey: the edges' Ingress hashes on both key headers,
// so one key's nonces and rate limits meet one edge, and reaches the edge's
// listener, in each layout.
func TestIngressHashesOnKey(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { testIngressHashesOnKey(t, readCluster(t, l.components)) })
	}
}

func testIngressHashesOnKey(t *testing.T, cl *cluster) {
	if len(cl.ingresses) == 0 {
		t.Fatal("no Ingress for the edges")
	}
	for _, in := range cl.ingresses {
		hash := in.Metadata.Annotations["nginx.ingress.kubernetes.io/upstream-hash-by"]
		for _, h := range []string{"$http_authorization", "$http_x_api_key"} {
			if !strings.Contains(hash, h) {
				t.Errorf("Ingress %s: upstream-hash-by %q lacks %s", in.Metadata.Name, hash, h)
			}
		}
		for _, r := range in.Spec.Rules {
			for _, path := range r.HTTP.Paths {
				b := path.Backend.Service
				s, ok := cl.services[b.Name]
				if !ok {
					t.Errorf("Ingress %s: backend Service %s does not exist", in.Metadata.Name, b.Name)
					continue
				}
				_, c := cl.programOf(s)
				if c == nil || k8sProgram(*c).name != "edge" {
					t.Errorf("Ingress %s: backend %s is not the edges", in.Metadata.Name, b.Name)
					continue
				}
				env, _ := cl.env(t, "edge", *c)
				for _, sp := range s.Spec.Ports {
					if sp.Name == b.Port.Name && b.Port.Name != "" || sp.Port == b.Port.Number && b.Port.Number != 0 {
						if got, want := containerPort(*c, sp.TargetPort), listenPort(env["SLIP_EDGE_ADDR"]); got != want {
							t.Errorf("Ingress %s reaches the edge on port %d, it listens on %d", in.Metadata.Name, got, want)
						}
					}
				}
			}
		}
	}
}

// k8sTopics returns the topics the Job creates, checked: the platform's
// topics, 3 replicas, min.insync.replicas 2, the bootstrap address the
// programs use, and the same partitions and retention as compose.yaml.
func k8sTopics(t *testing.T, cl *cluster) map[string]topic {
	t.Helper()
	for _, j := range cl.jobs {
		for _, c := range j.Spec.Template.Spec.Containers {
			script := strings.Join(append(c.Command, c.Args...), "\n")
			if !strings.Contains(script, "kafka-topics.sh") {
				continue
			}
			topics := parseTopics(t, script)
			checkTopics(t, "Job "+j.Metadata.Name, topics, 3, 2)
			for _, e := range c.Env {
				if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil || e.ValueFrom.ConfigMapKeyRef.Key != "SLIP_KAFKA_ADDR" {
					continue
				}
				if !strings.Contains(script, `--bootstrap-server "$`+e.Name+`"`) {
					t.Errorf("Job %s: the script does not use $%s as its bootstrap server", j.Metadata.Name, e.Name)
				}
			}
			compose := readCompose(t)
			single := parseTopics(t, strings.Join(compose.Services["kafka-topics"].Command, "\n"))
			for name, tp := range topics {
				if s := single[name]; s.partitions != tp.partitions || s.config["retention.ms"] != tp.config["retention.ms"] {
					t.Errorf("%s: compose.yaml creates it with %d partitions and retention %s, Kubernetes with %d and %s",
						name, s.partitions, s.config["retention.ms"], tp.partitions, tp.config["retention.ms"])
				}
			}
			return topics
		}
	}
	t.Fatal("no Job runs kafka-topics.sh")
	return nil
}

// TestKubernetesSecrets: the Secrets the manifests reference, in each
// layout, are the ones the directory's README tells the operator to
// create, key by key.
func TestKubernetesSecrets(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { testKubernetesSecrets(t, readCluster(t, l.components)) })
	}
}

func testKubernetesSecrets(t *testing.T, cl *cluster) {
	readme, err := os.ReadFile(filepath.Join(root, k8sDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	refs := map[string]bool{}
	for _, w := range cl.workloads {
		for _, c := range w.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					refs[e.ValueFrom.SecretKeyRef.Name+" "+e.ValueFrom.SecretKeyRef.Key+"="] = true // a line of its env file
				}
			}
		}
	}
	var missing []string
	for r := range refs {
		name, key, _ := strings.Cut(r, " ")
		if !strings.Contains(string(readme), "kubectl -n slipverify create secret generic "+name) || !strings.Contains(string(readme), key) {
			missing = append(missing, r)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("k8s/README.md does not tell how to create %v", missing)
	}
}

// timeParse returns the whole seconds of a duration, rounded up.
func timeParse(s string) (int, error) {
	d, err := time.ParseDuration(s)
	return int((d + time.Second - 1) / time.Second), err
}
