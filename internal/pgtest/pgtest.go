// Package pgtest gives tests a PostgreSQL server without containers.
//
// With UTCPD_TEST_POSTGRES set to a DSN (postgres://user@host:port/db), the
// tests use that server and create their databases in it. Otherwise, when
// the initdb and postgres binaries are found (on PATH, else the newest
// /usr/lib/postgresql/*/bin, where Debian's packages put them), a throwaway
// cluster is created in a temporary folder and listens on a free loopback
// port, with trust authentication for loopback TCP only and no Unix
// socket. postgres refuses to run as root, so when the tests run as root the
// cluster runs as the "postgres" system user (created by Debian's
// postgresql packages), which then owns the folder.
//
// When neither is available the tests skip, unless UTCPD_REQUIRE_POSTGRES=1
// (CI sets it), which turns the skip into a failure.
//
// A package shares one cluster through Main (from TestMain) and Shared;
// each test takes its own database with Database. A test that stops and
// starts the server (Stop, Start) owns a cluster from New.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/utcpd/utcpd/utcp"
)

// Environment variables the package reads.
const (
	// EnvDSN names an existing server to use instead of a throwaway one.
	EnvDSN = "UTCPD_TEST_POSTGRES"
	// EnvRequire, set to 1, fails a test that would skip for want of
	// PostgreSQL.
	EnvRequire = "UTCPD_REQUIRE_POSTGRES"
)

// Server is a PostgreSQL server for tests. Its methods are safe for
// concurrent use.
type Server struct {
	// DSN connects to the server's "postgres" database as a superuser.
	DSN string

	external bool   // from UTCPD_TEST_POSTGRES: never stopped or started
	bin      string // folder of initdb and postgres
	dir      string // the cluster's folder (data in dir/data)
	port     int
	cred     *syscall.Credential // nil: run as the current user

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

var dbSeq atomic.Int64

// Binaries returns the folder holding initdb and postgres, or "" when they
// are not installed.
func Binaries() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("postgres"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Dir(real)
			}
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if fileExists(filepath.Join(d, "initdb")) && fileExists(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// unavailable skips t (or fails it under UTCPD_REQUIRE_POSTGRES=1).
func unavailable(t testing.TB, why string) {
	t.Helper()
	msg := "PostgreSQL not available: " + why + "; set " + EnvDSN + " to a DSN or install PostgreSQL (apt-get install postgresql)"
	if os.Getenv(EnvRequire) == "1" {
		t.Fatal(msg + " (" + EnvRequire + "=1)")
	}
	t.Skip(msg)
}

// Launch creates and starts a throwaway cluster in a new temporary folder.
// Stop it (Close) when done. It fails when the binaries are missing.
func Launch() (*Server, error) {
	bin := Binaries()
	if bin == "" {
		return nil, errors.New("pgtest: initdb and postgres not found")
	}
	dir, err := os.MkdirTemp("", "utcpd-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	initdb.Dir = dir
	initdb.Env = s.env()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	if err := s.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) env() []string {
	env := []string{"LC_ALL=C", "LANG=C", "PATH=" + os.Getenv("PATH")}
	if s.cred != nil {
		env = append(env, "HOME="+s.dir)
	}
	return env
}

// Start starts the server's postgres process (again, after Stop) and waits
// until it accepts connections. It is an error on an external server.
func (s *Server) Start() error {
	if s.external {
		return errors.New("pgtest: cannot start an external server")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(filepath.Join(os.TempDir(), filepath.Base(s.dir)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.port), "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=32MB")
	cmd.Dir = s.dir
	cmd.Env = s.env()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done, s.log = cmd, done, logf
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.DSN)
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			_ = logf.Close()
			log, _ := os.ReadFile(logf.Name())
			return fmt.Errorf("pgtest: postgres exited at start:\n%s", log)
		case <-ctx.Done():
			return fmt.Errorf("pgtest: postgres not accepting connections after 60s: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop shuts the server down (fast shutdown: sessions are disconnected,
// committed transactions are kept) and waits for it to exit. Stopping a
// stopped server does nothing. It is an error on an external server.
func (s *Server) Stop() error {
	if s.external {
		return errors.New("pgtest: cannot stop an external server")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
	_ = s.log.Close()
	return nil
}

// Restartable reports whether Stop and Start work (a throwaway cluster).
func (s *Server) Restartable() bool { return !s.external }

// Close stops a throwaway cluster and removes its folder. It does nothing
// for an external server.
func (s *Server) Close() error {
	if s.external {
		return nil
	}
	err := s.Stop()
	_ = os.RemoveAll(s.dir)
	_ = os.Remove(filepath.Join(os.TempDir(), filepath.Base(s.dir)+".log"))
	return err
}

// Database creates a new, empty database for t and returns its DSN. The
// database is dropped when t ends (on an external server; a throwaway
// cluster goes away as a whole).
func (s *Server) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("utcpd_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", redact(s.DSN), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: creating database: %v", err)
	}
	if s.external {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if conn, err := pgx.Connect(ctx, s.DSN); err == nil {
				_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
				_ = conn.Close(ctx)
			}
		})
	}
	u, err := url.Parse(s.DSN)
	if err != nil {
		t.Fatalf("pgtest: DSN: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// redact shows a DSN, URL or key=value form, without its password.
func redact(dsn string) string { return utcp.RedactText(dsn) }

var (
	shared    *Server
	sharedErr error
)

// Main runs a package's tests with one shared server (see Shared): the
// external one, else a throwaway cluster started first and removed after
// the tests. Call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		shared = &Server{DSN: dsn, external: true}
		return m.Run()
	}
	if Binaries() == "" {
		sharedErr = errors.New("initdb and postgres not found")
		return m.Run()
	}
	shared, sharedErr = Launch()
	if sharedErr != nil {
		fmt.Fprintln(os.Stderr, sharedErr)
	}
	code := m.Run()
	if shared != nil {
		_ = shared.Close()
	}
	return code
}

// Shared returns the package's shared server (see Main), skipping t (or
// failing it, see EnvRequire) when there is none.
func Shared(t testing.TB) *Server {
	t.Helper()
	if shared == nil {
		why := "pgtest.Main was not called from TestMain"
		if sharedErr != nil {
			why = sharedErr.Error()
		}
		unavailable(t, why)
	}
	return shared
}

// New starts a throwaway cluster for t alone, which t may stop and start,
// removed when t ends. It skips t (or fails it, see EnvRequire) when the
// binaries are missing: an external server cannot be restarted.
func New(t testing.TB) *Server {
	t.Helper()
	if Binaries() == "" {
		unavailable(t, "initdb and postgres not found (a test that restarts the server needs them even with "+EnvDSN+")")
	}
	s, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
