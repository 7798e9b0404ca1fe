package jepsen

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// nsPrefix begins the name of every namespace the harness makes:
// jepsen-<pid>-<run>-<host>. The pid is the harness's, so a sweep can tell a
// dead run's namespaces from a live one's.
const nsPrefix = "jepsen-"

// bridgeAliasPrefix begins the alias of every bridge the harness makes
// (jepsen-<pid>); bridge names are jb<run>.
const bridgeAliasPrefix = "jepsen-"

// Available reports why the harness cannot run here: not root, or no
// `ip netns`. nil: it can.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("jepsen: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("jepsen: no ip command (iproute2)")
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		return fmt.Errorf("jepsen: ip netns list: %v: %s", err, out)
	}
	if _, err := exec.LookPath("tc"); err != nil {
		return errors.New("jepsen: no tc command (iproute2)")
	}
	return nil
}

// Host is one process's place on the network: its namespace, the root end
// of its veth pair and its address.
type Host struct {
	Name string // c1, n1, ...
	NS   string // the namespace
	Veth string // the veth's end in the root namespace (the bridge's port)
	IP   string // 169.254.X.Y
}

// Net is one run's network: a bridge in the root namespace with the address
// 169.254.X.1 (the clients, in the root namespace, reach every host through
// it) and one namespace per host joined to it. Its methods are safe for
// concurrent use.
type Net struct {
	run    string
	subnet int // X
	bridge string
	hosts  map[string]*Host
	netem  bool // the kernel has sch_netem

	mu     sync.Mutex
	cuts   map[[2]string]bool // blackhole routes installed: from, to
	shaped map[string]string  // host -> what its links carry now
	down   map[string]bool
	closed bool
}

// NewNet makes the bridge and a namespace per name, after sweeping what dead
// runs left. The caller closes it (Close), after the processes in it ended.
func NewNet(names []string) (n *Net, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	Sweep()
	run := randHex(3)
	n = &Net{run: run, bridge: "jb" + run, hosts: map[string]*Host{}, cuts: map[[2]string]bool{},
		shaped: map[string]string{}, down: map[string]bool{}}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	unlock, err := lockNet()
	if err != nil {
		return nil, err
	}
	n.subnet, err = freeSubnet()
	if err == nil {
		err = n.makeBridge()
	}
	unlock()
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		h := &Host{Name: name, NS: fmt.Sprintf("%s%d-%s-%s", nsPrefix, os.Getpid(), run, name),
			Veth: fmt.Sprintf("jv%s%d", run, i), IP: fmt.Sprintf("169.254.%d.%d", n.subnet, 10+i)}
		if err := n.makeHost(h); err != nil {
			return nil, err
		}
		n.hosts[name] = h
	}
	n.netem = n.probeNetem()
	return n, nil
}

// Host is the host of that name.
func (n *Net) Host(name string) *Host {
	h, ok := n.hosts[name]
	if !ok {
		panic("jepsen: no host " + name)
	}
	return h
}

// ClientIP is the root namespace's address on the bridge.
func (n *Net) ClientIP() string { return fmt.Sprintf("169.254.%d.1", n.subnet) }

// Describe is a line for the test's log.
func (n *Net) Describe() string {
	var hs []string
	for _, h := range n.sortedHosts() {
		hs = append(hs, h.Name+"="+h.IP)
	}
	netem := "no sch_netem in this kernel: delay is a rate limit's queue, loss a random classifier into a dropping class"
	if n.netem {
		netem = "sch_netem available"
	}
	return fmt.Sprintf("bridge %s 169.254.%d.0/24, clients at %s, %s; %s", n.bridge, n.subnet, n.ClientIP(), strings.Join(hs, " "), netem)
}

func (n *Net) sortedHosts() []*Host {
	var hs []*Host
	for _, h := range n.hosts {
		hs = append(hs, h)
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].IP < hs[j].IP })
	return hs
}

func (n *Net) makeBridge() error {
	alias := fmt.Sprintf("%s%d", bridgeAliasPrefix, os.Getpid())
	return ipAll(
		[]string{"link", "add", "name", n.bridge, "type", "bridge"},
		[]string{"link", "set", "dev", n.bridge, "alias", alias},
		[]string{"addr", "add", fmt.Sprintf("%s/24", n.ClientIP()), "dev", n.bridge},
		[]string{"link", "set", "dev", n.bridge, "up"},
	)
}

func (n *Net) makeHost(h *Host) error {
	if err := ip("netns", "add", h.NS); err != nil {
		return err
	}
	return ipAll(
		[]string{"link", "add", h.Veth, "type", "veth", "peer", "name", "eth0", "netns", h.NS},
		[]string{"link", "set", "dev", h.Veth, "master", n.bridge},
		[]string{"link", "set", "dev", h.Veth, "up"},
		[]string{"-n", h.NS, "addr", "add", h.IP + "/24", "dev", "eth0"},
		[]string{"-n", h.NS, "link", "set", "dev", "eth0", "up"},
		[]string{"-n", h.NS, "link", "set", "dev", "lo", "up"},
	)
}

// Close deletes the namespaces and the bridge (their veths go with them).
// Kill the processes in them first. It may be called more than once.
func (n *Net) Close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	for _, h := range n.hosts {
		killNamespace(h.NS)
	}
	_ = ip("link", "del", n.bridge)
}

// Sweep removes what runs whose process has died left behind: their
// namespaces (ending any process still inside, by its pid) and bridges.
func Sweep() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], nsPrefix) {
			continue
		}
		if pid := pidIn(strings.TrimPrefix(f[0], nsPrefix)); pid > 0 && !alive(pid) {
			killNamespace(f[0])
		}
	}
	links, _ := filepath.Glob("/sys/class/net/jb*")
	for _, l := range links {
		alias, err := os.ReadFile(filepath.Join(l, "ifalias"))
		if err != nil {
			continue
		}
		a := strings.TrimSpace(string(alias))
		if !strings.HasPrefix(a, bridgeAliasPrefix) {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimPrefix(a, bridgeAliasPrefix)); err == nil && !alive(pid) {
			_ = ip("link", "del", filepath.Base(l))
		}
	}
}

// killNamespace ends the processes inside ns, each by its pid, and deletes it.
func killNamespace(ns string) {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	for i := 0; i < 50; i++ { // a killed process leaves the namespace once it is reaped
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		if len(bytes.TrimSpace(out)) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = ip("netns", "del", ns)
}

// pidIn reads the pid at the start of "<pid>-<run>-<host>"; 0 when none.
func pidIn(s string) int {
	head, _, _ := strings.Cut(s, "-")
	pid, err := strconv.Atoi(head)
	if err != nil {
		return 0
	}
	return pid
}

func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// lockNet serialises the choice of a subnet among the runs on this machine.
func lockNet() (func(), error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "jepsen-net.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// freeSubnet picks X of 169.254.X.0/24 that no address or route of the root
// namespace uses (and never 169.254.169.0/24, where clouds answer metadata).
func freeSubnet() (int, error) {
	addrs, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return 0, fmt.Errorf("jepsen: ip addr: %w", err)
	}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return 0, fmt.Errorf("jepsen: ip route: %w", err)
	}
	used := string(addrs) + "\n" + string(routes)
	if strings.Contains(used, "169.254.0.0/16") {
		return 0, errors.New("jepsen: the root namespace routes 169.254.0.0/16 already; the harness would shadow it")
	}
	for range 64 {
		x, _ := rand.Int(rand.Reader, big.NewInt(200))
		sub := 20 + int(x.Int64()) // 20..219
		if sub == 169 {
			continue
		}
		if !strings.Contains(used, fmt.Sprintf("169.254.%d.", sub)) {
			return sub, nil
		}
	}
	return 0, errors.New("jepsen: no free 169.254.X.0/24")
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// ip runs the ip command; its error carries the command's output.
func ip(args ...string) error { return command("ip", args...) }

func ipAll(cmds ...[]string) error {
	for _, c := range cmds {
		if err := ip(c...); err != nil {
			return err
		}
	}
	return nil
}

func command(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("jepsen: %s %s: %v: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// The faults of the network.

// Cut drops what from sends to to, silently (a blackhole route in from's
// namespace): one way. Cut both ways for a partition.
func (n *Net) Cut(from, to string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := [2]string{from, to}
	if n.cuts[k] {
		return nil
	}
	if err := ip("-n", n.Host(from).NS, "route", "add", "blackhole", n.Host(to).IP+"/32"); err != nil {
		return err
	}
	n.cuts[k] = true
	return nil
}

// Partition cuts every host of a from every host of b, both ways.
func (n *Net) Partition(a, b []string) error {
	for _, x := range a {
		for _, y := range b {
			if err := errors.Join(n.Cut(x, y), n.Cut(y, x)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Heal removes every cut.
func (n *Net) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	for k := range n.cuts {
		if err := ip("-n", n.Host(k[0]).NS, "route", "del", "blackhole", n.Host(k[1]).IP+"/32"); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(n.cuts, k)
	}
	return errors.Join(errs...)
}

// Down takes a host's link to the bridge down: nothing reaches it, clients
// included, and it reaches nothing.
func (n *Net) Down(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := ip("link", "set", "dev", n.Host(name).Veth, "down"); err != nil {
		return err
	}
	n.down[name] = true
	return nil
}

// Up brings a host's link up again.
func (n *Net) Up(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := ip("link", "set", "dev", n.Host(name).Veth, "up"); err != nil {
		return err
	}
	delete(n.down, name)
	return nil
}

// Slow makes a host's link slow both ways: with sch_netem, 100 ms ± 50 ms of
// delay; without it, a rate limit of 256 kbit/s whose queue holds up to
// 500 ms (delay under load, and drops past it).
func (n *Net) Slow(name string) error {
	return n.shape(name, "slow", func(dev string) [][]string {
		if n.netem {
			return [][]string{{"qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "delay", "100ms", "50ms"}}
		}
		return [][]string{{"qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf", "rate", "256kbit", "burst", "16kb", "latency", "500ms"}}
	})
}

// Lossy drops pct percent of a host's packets, each way: with sch_netem,
// netem loss; without it, an HTB root whose default class passes everything
// and a classic BPF filter (a random number below the threshold) that sends
// the chosen packets into a class whose queue holds none.
func (n *Net) Lossy(name string, pct int) error {
	if pct <= 0 || pct >= 100 {
		return fmt.Errorf("jepsen: loss of %d%%", pct)
	}
	threshold := uint64(pct) * (1 << 32) / 100
	// ld rand (SKF_AD_OFF+SKF_AD_RANDOM); jge #threshold ? ret 0 (no match) : ret -1 (classid 1:20)
	prog := fmt.Sprintf("4,32 0 0 %d,53 0 1 %d,6 0 0 0,6 0 0 4294967295", uint32(0xfffff000+56), threshold)
	return n.shape(name, fmt.Sprintf("loss %d%%", pct), func(dev string) [][]string {
		if n.netem {
			return [][]string{{"qdisc", "add", "dev", dev, "root", "handle", "1:", "netem", "loss", fmt.Sprintf("%d%%", pct)}}
		}
		return [][]string{
			{"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "10"},
			{"class", "add", "dev", dev, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit"},
			{"class", "add", "dev", dev, "parent", "1:", "classid", "1:20", "htb", "rate", "8bit", "ceil", "8bit"},
			{"qdisc", "add", "dev", dev, "parent", "1:20", "handle", "20:", "pfifo", "limit", "0"},
			{"filter", "add", "dev", dev, "parent", "1:", "protocol", "all", "prio", "1", "bpf", "bytecode", prog, "classid", "1:20"},
		}
	})
}

// shape runs the tc commands cmds gives for each end of a host's veth: the
// namespace's eth0 shapes what the host sends, the bridge's port what it
// receives.
func (n *Net) shape(name, what string, cmds func(dev string) [][]string) error {
	h := n.Host(name)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shaped[name] != "" {
		return fmt.Errorf("jepsen: %s is shaped already (%s)", name, n.shaped[name])
	}
	n.shaped[name] = what
	for _, end := range []struct{ ns, dev string }{{h.NS, "eth0"}, {"", h.Veth}} {
		for _, c := range cmds(end.dev) {
			if end.ns != "" {
				c = append([]string{"-n", end.ns}, c...)
			}
			if err := command("tc", c...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Unshape takes what Slow or Lossy put on a host's links off.
func (n *Net) Unshape(name string) error {
	h := n.Host(name)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.shaped[name] == "" {
		return nil
	}
	err := errors.Join(command("tc", "-n", h.NS, "qdisc", "del", "dev", "eth0", "root"),
		command("tc", "qdisc", "del", "dev", h.Veth, "root"))
	delete(n.shaped, name)
	return err
}

// HealAll heals every cut, brings every link up and unshapes every host.
func (n *Net) HealAll() error {
	errs := []error{n.Heal()}
	n.mu.Lock()
	var down, shaped []string
	for h := range n.down {
		down = append(down, h)
	}
	for h := range n.shaped {
		shaped = append(shaped, h)
	}
	n.mu.Unlock()
	for _, h := range down {
		errs = append(errs, n.Up(h))
	}
	for _, h := range shaped {
		errs = append(errs, n.Unshape(h))
	}
	return errors.Join(errs...)
}

// probeNetem reports whether the kernel takes a netem qdisc.
func (n *Net) probeNetem() bool {
	for _, h := range n.hosts {
		if command("tc", "qdisc", "add", "dev", h.Veth, "root", "netem", "delay", "1ms") != nil {
			return false
		}
		_ = command("tc", "qdisc", "del", "dev", h.Veth, "root")
		return true
	}
	return false
}
