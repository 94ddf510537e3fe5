package transporttest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// PeerEnv is the environment variable that turns the npm peer tests on:
// without it set to 1 they are skipped, with it a missing peer fails.
const PeerEnv = "UTCPD_NPM_PEERS"

// Peer is a third-party test peer installed with npm in the testing
// package's testdata/peer folder (a pinned package.json and a committed
// package-lock.json; .ci/run runs `npm ci` there).
type Peer struct {
	// Dir is the absolute path of testdata/peer.
	Dir string
	// Modules is Dir/node_modules.
	Modules string
	// Node is node on PATH (empty from NPMPeerDir).
	Node string
	// Install is the command that installs the peer, run from the
	// repository root.
	Install string
}

// NPMPeer gates a test on the npm peer in testdata/peer (relative to the
// testing package's folder) and node on PATH. Without UTCPD_NPM_PEERS=1 it
// skips t, naming the install command; with it, it fails t when node or
// one of pkgs (npm package names, found by their package.json under
// node_modules) is missing. It returns the peer with Node set.
func NPMPeer(t testing.TB, pkgs ...string) Peer {
	t.Helper()
	p := NPMPeerDir(t, pkgs...)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("%s=1 but node is not installed: %v", PeerEnv, err)
	}
	p.Node = node
	return p
}

// NPMPeerDir is NPMPeer for a peer that brings its own node (or needs
// none): it checks pkgs only and leaves Node empty.
func NPMPeerDir(t testing.TB, pkgs ...string) Peer {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "peer"))
	if err != nil {
		t.Fatal(err)
	}
	p := Peer{Dir: dir, Modules: filepath.Join(dir, "node_modules"), Install: installCommand(dir)}
	if os.Getenv(PeerEnv) != "1" {
		t.Skipf("set %s=1 to run the %s npm peer test (install it with: %s)", PeerEnv, strings.Join(pkgs, ", "), p.Install)
	}
	for _, pkg := range pkgs {
		if _, err := os.Stat(filepath.Join(p.Modules, pkg, "package.json")); err != nil {
			t.Fatalf("%s=1 but %s is not installed (%v); install it with: %s", PeerEnv, pkg, err, p.Install)
		}
	}
	return p
}

// installCommand is the `npm ci` for dir, with dir relative to the
// module root (the nearest folder above it holding go.mod) when there is
// one.
func installCommand(dir string) string {
	prefix := dir
	for root := filepath.Dir(dir); ; root = filepath.Dir(root) {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			if rel, err := filepath.Rel(root, dir); err == nil {
				prefix = filepath.ToSlash(rel)
			}
			break
		}
		if filepath.Dir(root) == root {
			break
		}
	}
	return "npm ci --prefix " + prefix + " --no-audit --no-fund"
}

// Start runs `node script` (script relative to the testing package's
// folder) with NODE_PATH set to the peer's node_modules and env appended,
// its stderr on the test's, and stops it at cleanup (after the cleanups
// registered later, so a transport still connected to it closes first).
// The peer must print one JSON line first; Start decodes it into hello (a
// pointer) and fails t unless it has a non-zero "port". The rest of its
// output is discarded. It returns the port.
func (p Peer) Start(t testing.TB, script string, hello any, env ...string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, p.Node, script)
	cmd.Env = append(append(os.Environ(), "NODE_PATH="+p.Modules), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	lines := bufio.NewScanner(out)
	var port struct {
		Port int `json:"port"`
	}
	if !lines.Scan() || json.Unmarshal(lines.Bytes(), &port) != nil || port.Port == 0 {
		t.Fatalf("the peer did not print its port: %q", lines.Text())
	}
	if hello != nil {
		if err := json.Unmarshal(lines.Bytes(), hello); err != nil {
			t.Fatalf("the peer's first line %q: %v", lines.Text(), err)
		}
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return port.Port
}
