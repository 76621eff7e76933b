// Package pgtest starts a throwaway PostgreSQL cluster for the tests of one test binary and
// hands each test a database of its own.
//
// A test binary calls Main from its TestMain: it starts one cluster (initdb in a temporary
// directory, postgres on a free loopback port, fsync off) unless LOOPBOT_TEST_DATABASE_URL
// names a server to use instead, runs the tests, and stops the cluster. A test then calls
// URL, which creates a new database for it and drops it when the test ends. Where no
// PostgreSQL is installed, URL skips the test with the install hint, and fails it instead
// when CI=true: the conformance suite must not pass in CI by running nothing.
//
// initdb refuses to run as root, so as root the cluster is made and run as the postgres
// user, in a directory given to that user.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names a server the tests use instead of starting their own. Its user must be
// allowed to create databases.
const EnvURL = "LOOPBOT_TEST_DATABASE_URL"

// InstallHint is what a test that skips for want of PostgreSQL says.
const InstallHint = "PostgreSQL is not installed: apt-get install postgresql (or set " + EnvURL + ")"

// binGlob is where Debian's packages put the server's programs, a directory per major
// version; the newest is used.
const binGlob = "/usr/lib/postgresql/*/bin/initdb"

var (
	once   sync.Once
	stopFn func()
	mu     sync.Mutex
	// admin is the URL of the server's maintenance database; unavailable says why there
	// is none.
	admin       string
	unavailable string
	seq         atomic.Int64
)

// Main starts the cluster, runs the tests and stops it. Use it as TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	ensure()
	code := m.Run()
	Stop()
	os.Exit(code)
}

// ensure starts the server once.
func ensure() {
	once.Do(func() {
		stop, err := start()
		mu.Lock()
		defer mu.Unlock()
		stopFn = stop
		if err != nil {
			unavailable = err.Error()
		}
	})
}

// Stop stops the cluster if one was started. A TestMain that does more than Main calls it
// after m.Run; the cluster then starts when a test first calls URL, so a test binary whose
// tests mostly need no database pays nothing for it.
func Stop() {
	mu.Lock()
	stop := stopFn
	stopFn = nil
	mu.Unlock()
	if stop != nil {
		stop()
	}
}

// URL creates an empty database for t and returns its URL; the database is dropped when t
// ends. Without a server it skips t, or fails it under CI=true.
func URL(t testing.TB) string {
	t.Helper()
	ensure()
	mu.Lock()
	a, why := admin, unavailable
	mu.Unlock()
	if a == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL for the tests under CI: %s", why)
		}
		t.Skip(why)
	}
	name := fmt.Sprintf("loopbot_test_%d_%d", os.Getpid(), seq.Add(1))
	if err := exec1(a, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		// WITH (FORCE) ends connections a failed test left open.
		if err := exec1(a, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	return withDatabase(a, name)
}

// exec1 runs one statement on its own connection.
func exec1(url, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase returns the URL raw with its database replaced by name. start has checked
// that raw is a URL.
func withDatabase(raw, name string) string {
	u, err := neturl.Parse(raw)
	if err != nil {
		return raw
	}
	u.Path = "/" + name
	return u.String()
}

// start finds or starts the server and returns how to stop it.
func start() (stop func(), err error) {
	if url := os.Getenv(EnvURL); url != "" {
		if u, err := neturl.Parse(url); err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
			return nil, fmt.Errorf("%s must be a postgres:// URL", EnvURL)
		}
		if err := exec1(url, "SELECT 1"); err != nil {
			return nil, fmt.Errorf("%s does not answer: %w", EnvURL, err)
		}
		mu.Lock()
		admin = url
		mu.Unlock()
		return nil, nil
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	return startCluster(bin)
}

// startCluster makes the shared cluster and returns how to stop it.
func startCluster(bin string) (func(), error) {
	c, err := newCluster(bin)
	if err != nil {
		return nil, err
	}
	mu.Lock()
	admin = c.URL
	mu.Unlock()
	return c.close, nil
}

// Cluster is a PostgreSQL server of the tests: its data directory and the process running
// on it.
type Cluster struct {
	// URL is the server's maintenance database (postgres), as the superuser.
	URL string

	dir, data, bin string
	port           int
	asUser         func(name string, args ...string) *exec.Cmd
	cmd            *exec.Cmd
	exited         chan error
	log            *lockedWriter
}

// NewCluster starts a cluster of t's own, for a test that stops or restarts the server,
// and removes it when t ends. Without PostgreSQL it skips t, or fails it under CI=true.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin, err := findBin()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL for the tests under CI: %v", err)
		}
		t.Skip(err.Error())
	}
	c, err := newCluster(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

// findBin returns the directory of the newest installed server's programs.
func findBin() (string, error) {
	found, _ := filepath.Glob(binGlob)
	slices.SortFunc(found, func(a, b string) int { return versionOf(b) - versionOf(a) })
	if len(found) > 0 {
		return filepath.Dir(found[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New(InstallHint)
}

// newCluster makes a cluster in a new directory and starts postgres on it.
func newCluster(bin string) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "loopbot-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, data: filepath.Join(dir, "data"), bin: bin, asUser: exec.Command}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			c.remove()
			return nil, fmt.Errorf("running as root, and there is no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			c.remove()
			return nil, err
		}
		c.asUser = func(name string, args ...string) *exec.Cmd {
			// The server runs as postgres directly, with no wrapper between: the signal
			// that stops it must reach it.
			cmd := exec.Command(name, args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
			cmd.Env = append(os.Environ(), "HOME="+dir)
			return cmd
		}
	}
	initdb := c.asUser(filepath.Join(bin, "initdb"), "-D", c.data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		c.remove()
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	for tries := 0; ; tries++ {
		port, err := freePort()
		if err != nil {
			c.remove()
			return nil, err
		}
		err = c.start(port)
		if err == nil {
			return c, nil
		}
		if tries == 3 {
			c.remove()
			return nil, err
		}
		// Most likely the port was taken between the probe and the start.
	}
}

// start runs postgres on the cluster's data at port and waits until it answers.
func (c *Cluster) start(port int) error {
	cmd := c.asUser(filepath.Join(c.bin, "postgres"), "-D", c.data, "-k", c.dir, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	c.log = &lockedWriter{}
	cmd.Stdout, cmd.Stderr = c.log, c.log
	// Its own process group, so the interrupt of a test run does not reach it before
	// the tests have dropped their databases.
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	// A test binary killed (a timeout's SIGQUIT, a kill -9) takes its server with it:
	// the fast shutdown signal when the process that started it dies.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := waitReady(url, exited); err != nil {
		if !errors.Is(err, errExited) {
			_ = cmd.Process.Signal(syscall.SIGINT)
			<-exited
		}
		return fmt.Errorf("postgres did not start: %w: %s", err, c.log.text())
	}
	c.cmd, c.exited, c.port, c.URL = cmd, exited, port, url
	return nil
}

// Stop stops the server with its fast shutdown: sessions end, and what they committed is
// kept.
func (c *Cluster) Stop() {
	if c.cmd == nil {
		return
	}
	// SIGINT is postgres's fast shutdown: it ends the sessions and stops.
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.cmd = nil
}

// Start starts a stopped server again on its port: with Stop, a test keeps the database
// away from its clients for as long as it needs.
func (c *Cluster) Start() error {
	if c.cmd != nil {
		return errors.New("pgtest: the server is running")
	}
	return c.start(c.port)
}

// Restart stops the server and starts it again on the same port, as a database restarted
// under its clients is.
func (c *Cluster) Restart() error {
	c.Stop()
	return c.start(c.port)
}

// Database creates a new database in the cluster and returns its URL.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("loopbot_test_%d_%d", os.Getpid(), seq.Add(1))
	if err := exec1(c.URL, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	return withDatabase(c.URL, name)
}

func (c *Cluster) close() {
	c.Stop()
	c.remove()
}

func (c *Cluster) remove() { _ = os.RemoveAll(c.dir) }

var errExited = errors.New("postgres exited")

// waitReady polls url until the server answers, it exits, or a minute passes.
func waitReady(url string, exited <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := exec1(url, "SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case e := <-exited:
			return fmt.Errorf("%w: %v", errExited, e)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

// versionOf is the major version in a path under /usr/lib/postgresql, 0 if none.
func versionOf(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedWriter collects the server's output, written from two pipes at once.
type lockedWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedWriter) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
