package clickhouse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Replica makes a server one replica of a ClickHouse cluster of one shard:
// its macros ({shard}, {replica}), the cluster in remote_servers with every
// replica, ZooKeeper, and the queue of ON CLUSTER statements.
type Replica struct {
	Cluster         string   // the cluster's name in remote_servers (SLIP_CLICKHOUSE_CLUSTER)
	Name            string   // this replica's {replica} macro, unique in the cluster
	Shard           string   // the {shard} macro, the same on every replica
	Replicas        []string // the native addresses of every replica, this one included
	InterserverAddr string   // where the other replicas fetch this one's parts (loopback)
	ZooKeeper       string   // ZooKeeper's client address
}

// ClusterName is what a cluster's name may be: a plain identifier, written
// as it is in remote_servers and in ON CLUSTER.
var ClusterName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func (r *Replica) validate() error {
	var errs []error
	if !ClusterName.MatchString(r.Cluster) {
		errs = append(errs, fmt.Errorf("SLIP_CLICKHOUSE_CLUSTER: %q is not a plain identifier (letters, digits, _)", r.Cluster))
	}
	if r.Name == "" || r.Shard == "" {
		errs = append(errs, errors.New("clickhouse: a replica needs its {replica} and {shard} macros"))
	}
	for _, a := range append([]string{r.InterserverAddr, r.ZooKeeper}, r.Replicas...) {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("clickhouse: replica address: %v", err))
		}
	}
	return errors.Join(errs...)
}

type hostPort struct{ Host, Port string }

func splitAddr(a string) hostPort {
	h, p, _ := net.SplitHostPort(a) // checked by validate
	return hostPort{h, p}
}

// replicaXML is what config.xml says of a replica.
type replicaXML struct {
	Name, ReplicaName, Shard     string
	InterserverPort              string
	ZooKeeperHost, ZooKeeperPort string
	Replicas                     []hostPort
}

func (r *Replica) xml() *replicaXML {
	x := &replicaXML{Name: r.Cluster, ReplicaName: r.Name, Shard: r.Shard, InterserverPort: splitAddr(r.InterserverAddr).Port}
	zk := splitAddr(r.ZooKeeper)
	x.ZooKeeperHost, x.ZooKeeperPort = zk.Host, zk.Port
	for _, a := range r.Replicas {
		x.Replicas = append(x.Replicas, splitAddr(a))
	}
	return x
}

// Debian's zookeeper package: the server's classes, run by the JVM.
const (
	DefaultJava  = "/usr/bin/java"
	ZooKeeperJar = "/usr/share/java/zookeeper.jar"
)

// ZooKeeperConfig says where a ZooKeeper server keeps its files and where
// it listens.
type ZooKeeperConfig struct {
	Dir  string // zoo.cfg, data/
	Addr string // client port, loopback
	Java string // empty means DefaultJava
	Log  io.Writer
	// Ready bounds the wait until it serves; zero means a minute.
	Ready time.Duration
}

func (c ZooKeeperConfig) java() string {
	if c.Java != "" {
		return c.Java
	}
	return DefaultJava
}

// Installed reports whether the JVM and Debian's ZooKeeper are there.
func (c ZooKeeperConfig) Installed() bool {
	_, err1 := os.Stat(c.java())
	_, err2 := os.Stat(ZooKeeperJar)
	return err1 == nil && err2 == nil
}

// ZooKeeper is a standalone ZooKeeper server, running until Stop or Kill;
// Restart starts it again with its data.
type ZooKeeper struct {
	cfg  ZooKeeperConfig
	proc atomic.Pointer[process] // replaced by each start; read by Supervise
}

// StartZooKeeper writes zoo.cfg under c.Dir (keeping any data there),
// starts the server and waits until it answers. It dies with the calling
// process.
func StartZooKeeper(ctx context.Context, c ZooKeeperConfig) (*ZooKeeper, error) {
	if !c.Installed() {
		return nil, fmt.Errorf("zookeeper: %s or %s is missing (apt-get install zookeeper)", c.java(), ZooKeeperJar)
	}
	host, port, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("SLIP_ZOOKEEPER_ADDR: %v", err)
	}
	if c.Dir, err = filepath.Abs(c.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(c.Dir, "data"), 0o700); err != nil {
		return nil, err
	}
	// A short tick lets ClickHouse's 10 s sessions (20 ticks at most).
	cfg := fmt.Sprintf("tickTime=500\ndataDir=%s\nclientPort=%s\nclientPortAddress=%s\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n",
		filepath.Join(c.Dir, "data"), port, host)
	if err := os.WriteFile(filepath.Join(c.Dir, "zoo.cfg"), []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	z := &ZooKeeper{cfg: c}
	if err := z.Restart(ctx); err != nil {
		return nil, err
	}
	return z, nil
}

// Restart starts the server on its directory and port after a Stop or
// Kill, and waits until it answers.
func (z *ZooKeeper) Restart(ctx context.Context) error {
	c := z.cfg
	cmd := exec.Command(c.java(), "-Xmx128m", "-XX:+UseSerialGC", "-cp", ZooKeeperJar,
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(c.Dir, "zoo.cfg"))
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = c.Log, c.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("zookeeper: start: %w", err)
	}
	p := watch(cmd)
	z.proc.Store(p)
	wait := c.Ready
	if wait == 0 {
		wait = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !z.ok() {
		select {
		case <-z.proc.Load().done:
			return fmt.Errorf("zookeeper: exited before it answered: %v", z.proc.Load().err)
		case <-ctx.Done():
			z.Kill()
			return fmt.Errorf("zookeeper: no answer on %s within %s", c.Addr, wait)
		case <-tick.C:
		}
	}
	return nil
}

// ok asks the server srvr once: it answers with its version only once it
// serves sessions (ruok's imok comes earlier, while it still refuses them,
// and a clickhouse-server refused at its start fails its queue of ON
// CLUSTER statements).
func (z *ZooKeeper) ok() bool {
	conn, err := net.DialTimeout("tcp", z.cfg.Addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("srvr")); err != nil {
		return false
	}
	b, _ := io.ReadAll(io.LimitReader(conn, 4096))
	return strings.HasPrefix(string(b), "Zookeeper version:")
}

// Addr is the client address.
func (z *ZooKeeper) Addr() string { return z.cfg.Addr }

// Pid is the server process's id.
func (z *ZooKeeper) Pid() int { return z.proc.Load().cmd.Process.Pid }

// Done is closed when the server process has exited.
func (z *ZooKeeper) Done() <-chan struct{} { return z.proc.Load().done }

// Stop sends SIGTERM and waits; after timeout it kills.
func (z *ZooKeeper) Stop(timeout time.Duration) error {
	return z.proc.Load().stop("zookeeper", timeout)
}

// Kill stops the server with SIGKILL and waits for it.
func (z *ZooKeeper) Kill() { z.proc.Load().kill() }

// ClusterConfig describes a cluster of one shard on loopback: a ZooKeeper
// and one clickhouse-server per entry of TCPAddrs.
type ClusterConfig struct {
	Dir       string // zookeeper/ and one directory per replica (r1/, r2/, ...)
	Name      string // the cluster's name in remote_servers
	ZooKeeper string // ZooKeeper's client address
	// One per replica, in order: native, HTTP and interserver addresses.
	TCPAddrs, HTTPAddrs, InterserverAddrs []string
	Binary, Java                          string
	User, Password                        string
	Log                                   io.Writer
}

// Validate returns every problem of c at once.
func (c ClusterConfig) Validate() error {
	var errs []error
	n := len(c.TCPAddrs)
	if n == 0 || len(c.HTTPAddrs) != n || len(c.InterserverAddrs) != n {
		errs = append(errs, fmt.Errorf("SLIP_CLICKHOUSE_ADDR, SLIP_CLICKHOUSE_HTTP_ADDR, SLIP_CLICKHOUSE_INTERSERVER_ADDR: one address per replica each (%d, %d, %d)",
			n, len(c.HTTPAddrs), len(c.InterserverAddrs)))
	}
	for i := range c.TCPAddrs {
		if i < len(c.HTTPAddrs) && i < len(c.InterserverAddrs) {
			if err := c.replica(i).Validate(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, _, err := net.SplitHostPort(c.ZooKeeper); err != nil {
		errs = append(errs, fmt.Errorf("SLIP_ZOOKEEPER_ADDR: %v", err))
	}
	return errors.Join(errs...)
}

// replica is the configuration of the i-th replica, named r1, r2, ...
func (c ClusterConfig) replica(i int) Config {
	name := fmt.Sprintf("r%d", i+1)
	return Config{Dir: filepath.Join(c.Dir, name), TCPAddr: c.TCPAddrs[i], HTTPAddr: c.HTTPAddrs[i], Binary: c.Binary,
		User: c.User, Password: c.Password, Log: c.Log,
		Replica: &Replica{Cluster: c.Name, Name: name, Shard: "1", Replicas: c.TCPAddrs, InterserverAddr: c.InterserverAddrs[i], ZooKeeper: c.ZooKeeper}}
}

// Cluster is a ZooKeeper and the replicas of one shard, each its own
// process.
type Cluster struct {
	Name      string
	ZooKeeper *ZooKeeper
	Replicas  []*Server
}

// StartCluster starts ZooKeeper, then every replica, and returns once all
// answer. On an error it stops what it started.
func StartCluster(ctx context.Context, c ClusterConfig) (*Cluster, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	zk, err := StartZooKeeper(ctx, ZooKeeperConfig{Dir: filepath.Join(c.Dir, "zookeeper"), Addr: c.ZooKeeper, Java: c.Java, Log: c.Log})
	if err != nil {
		return nil, err
	}
	cl := &Cluster{Name: c.Name, ZooKeeper: zk}
	for i := range c.TCPAddrs {
		s, err := Start(ctx, c.replica(i))
		if err != nil {
			cl.Stop(30 * time.Second)
			return nil, err
		}
		cl.Replicas = append(cl.Replicas, s)
	}
	return cl, nil
}

// Addrs are the replicas' native addresses, comma-separated, as the usage
// tier's SLIP_CLICKHOUSE_ADDR lists them.
func (c *Cluster) Addrs() string {
	var a []string
	for _, s := range c.Replicas {
		a = append(a, s.Addr())
	}
	return strings.Join(a, ",")
}

// Stop stops the replicas, then ZooKeeper.
func (c *Cluster) Stop(timeout time.Duration) error {
	var errs []error
	for _, s := range c.Replicas {
		errs = append(errs, s.Stop(timeout))
	}
	return errors.Join(append(errs, c.ZooKeeper.Stop(timeout))...)
}

// restartable is a part of the cluster that Supervise starts again.
type restartable interface {
	Done() <-chan struct{}
	Restart(context.Context) error
}

// Supervise starts again every part of the cluster that exits, as a
// process supervisor does in production, until ctx ends; it returns then.
// Nothing else may restart the parts meanwhile.
func (c *Cluster) Supervise(ctx context.Context, log *slog.Logger) {
	parts := map[string]restartable{"zookeeper": c.ZooKeeper}
	for i, s := range c.Replicas {
		parts[fmt.Sprintf("replica r%d", i+1)] = s
	}
	var wg sync.WaitGroup
	for name, p := range parts {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-p.Done():
				}
				log.Warn(name + " exited; starting it again")
				for pause := 100 * time.Millisecond; ; pause = min(2*pause, 5*time.Second) {
					err := p.Restart(ctx)
					if err == nil {
						log.Info(name + " is back")
						break
					}
					log.Warn("could not start "+name, "err", err, "retry_in", pause.String())
					select {
					case <-ctx.Done():
						return
					case <-time.After(pause):
					}
				}
			}
		})
	}
	wg.Wait()
}
