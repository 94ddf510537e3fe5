package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// heyModule is the load generator installed when none is on PATH.
const heyModule = "github.com/rakyll/hey@v0.1.4"

// proc is a process the harness started, in its own process group.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string // what it printed after "listening on "
	done chan struct{}
}

// stop ends the process group: SIGTERM, then SIGKILL after a grace.
func (p *proc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// start runs cmd in its own process group with its stderr (and the stdout
// after the first line holding marker) in logPath, and waits until it
// printed marker followed by an address.
func start(name, logPath, marker string, cmd *exec.Cmd) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), marker); ok {
				addrc <- strings.TrimSpace(a)
				break
			}
		}
		close(addrc)
		_, _ = io.Copy(logf, out)
	}()
	select {
	case a, ok := <-addrc:
		if !ok || a == "" {
			p.stop()
			return nil, fmt.Errorf("%s exited before listening; see %s", name, logPath)
		}
		p.addr = strings.TrimPrefix(a, "http://")
		return p, nil
	case <-time.After(90 * time.Second):
		p.stop()
		return nil, fmt.Errorf("%s did not listen within 90 s; see %s", name, logPath)
	}
}

// selfRole starts this executable in a role (servers.go).
func selfRole(dir, role string, env ...string) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(append(os.Environ(), roleEnv+"="+role), env...)
	return start(role, filepath.Join(dir, role+".log"), "listening on ", cmd)
}

// moduleRoot is the folder of the utcpd module (go.mod).
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run the harness from inside the utcpd repository")
	}
	return filepath.Dir(mod), nil
}

// buildDaemon builds ./cmd/utcpd into dir.
func buildDaemon(root, dir string) (string, error) {
	bin := filepath.Join(dir, "utcpd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/utcpd")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building utcpd: %w", err)
	}
	return bin, nil
}

// daemon is one running utcpd.
type daemon struct {
	*proc
	base string // http://addr
}

// startDaemon starts utcpd serve with the configuration file cfg and
// extra flags (the default configuration when none), its log in dir.
func startDaemon(bin, dir, name, cfg string, extra ...string) (*daemon, error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--config", cfg}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	// A clean environment: no UTCPD_* setting of the caller's shell
	// changes the configuration under test.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	p, err := start(name, filepath.Join(dir, name+".log"), "utcpd listening on ", cmd)
	if err != nil {
		return nil, err
	}
	d := &daemon{proc: p, base: "http://" + p.addr}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(d.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d, nil
			}
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s not ready within 2 minutes; see %s", name, filepath.Join(dir, name+".log"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeConfig writes the daemon's configuration: the tool server's manual
// as "bench" and, when node and everything are set, server-everything over
// stdio as manual "ev" (tools ev.everything.*).
func writeConfig(path, toolAddr, node, everything string) error {
	templates := []map[string]any{{
		"name": "bench", "call_template_type": "http", "http_method": "GET",
		"url": "http://" + toolAddr + "/utcp",
	}}
	if everything != "" {
		templates = append(templates, map[string]any{
			"name": "ev", "call_template_type": "mcp",
			"config": map[string]any{"mcpServers": map[string]any{
				"everything": map[string]any{"command": node, "args": []string{everything, "stdio"}},
			}},
		})
	}
	data, err := json.MarshalIndent(map[string]any{"manual_call_templates": templates}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// peers are the npm packages of the MCP comparison.
type peers struct {
	node, everything, supergateway, preload string
}

// installPeers finds server-everything and supergateway at the versions
// internal/e2e/testdata/peer pins: in that folder's node_modules when it
// is installed, else installed with npm ci into a temporary prefix.
func installPeers(root, tmp string) (peers, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return peers{}, fmt.Errorf("the MCP comparison needs node and npm: %w", err)
	}
	src := filepath.Join(root, "internal", "e2e", "testdata", "peer")
	p := peers{node: node, preload: filepath.Join(src, "loopback.cjs")}
	mods := filepath.Join(src, "node_modules")
	if !installed(mods) {
		prefix := filepath.Join(tmp, "npm")
		if err := os.MkdirAll(prefix, 0o755); err != nil {
			return p, err
		}
		for _, f := range []string{"package.json", "package-lock.json"} {
			data, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				return p, err
			}
			if err := os.WriteFile(filepath.Join(prefix, f), data, 0o644); err != nil {
				return p, err
			}
		}
		fmt.Fprintf(os.Stderr, "installing server-everything and supergateway (pinned in %s) into %s\n", src, prefix)
		cmd := exec.Command("npm", "ci", "--prefix", prefix, "--no-audit", "--no-fund")
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return p, fmt.Errorf("npm ci: %w", err)
		}
		mods = filepath.Join(prefix, "node_modules")
	}
	p.everything = filepath.Join(mods, "@modelcontextprotocol", "server-everything", "dist", "index.js")
	p.supergateway = filepath.Join(mods, "supergateway", "dist", "index.js")
	return p, nil
}

func installed(mods string) bool {
	for _, pkg := range []string{"@modelcontextprotocol/server-everything", "supergateway"} {
		if _, err := os.Stat(filepath.Join(mods, pkg, "package.json")); err != nil {
			return false
		}
	}
	return true
}

// startSupergateway runs supergateway 4.0.0 in its SSE mode (its fastest)
// in front of server-everything over stdio, on a free loopback port, and
// returns its SSE endpoint.
func startSupergateway(p peers, dir string) (*proc, string, error) {
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(p.node, p.supergateway, "--stdio", p.node+" "+p.everything+" stdio",
		"--outputTransport", "sse", "--port", strconv.Itoa(port), "--logLevel", "none")
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=--require "+p.preload)
	logf, err := os.Create(filepath.Join(dir, "supergateway.log"))
	if err != nil {
		return nil, "", err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	pr := &proc{name: "supergateway", cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(pr.done) }()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return pr, "http://" + addr + "/sse", nil
		}
		if time.Now().After(deadline) {
			pr.stop()
			return nil, "", fmt.Errorf("supergateway did not listen on %s within 60 s; see %s", addr, logf.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// findHey returns hey from PATH, else installs the pinned version into
// a temporary GOBIN.
func findHey(ctx context.Context, tmp string) (string, error) {
	if p, err := exec.LookPath("hey"); err == nil {
		return p, nil
	}
	bin := filepath.Join(tmp, "gobin")
	fmt.Fprintf(os.Stderr, "installing %s into %s\n", heyModule, bin)
	cmd := exec.CommandContext(ctx, "go", "install", heyModule)
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	cmd.Dir = tmp // outside the module: go install pkg@version
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("installing hey: %w", err)
	}
	return filepath.Join(bin, "hey"), nil
}

// rssMB returns VmRSS and VmHWM of pid in MB (0 where unreadable).
func rssMB(pid int) (rss, hwm float64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		for key, dst := range map[string]*float64{"VmRSS:": &rss, "VmHWM:": &hwm} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				*dst = kb / 1024
			}
		}
	}
	return rss, hwm
}

// loadAvg is the 1-minute load average (0 where unreadable).
func loadAvg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f, _ := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	return f
}
