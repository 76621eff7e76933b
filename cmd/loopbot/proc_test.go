package main

import (
	"github.com/loopbot/loopbot/store/postgres/pgtest"

	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// binDir holds the loopbot binary the fault tests build once per test process; TestMain
// removes it.
var binDir string

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loopbot-bin-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	// The PostgreSQL cluster of the tests that asked for one (pgtest.URL).
	pgtest.Stop()
	os.Exit(code)
}

// loopbotBinary builds the real binary, once, so that the fault tests can kill it as the
// operating system would. It skips in -short mode.
func loopbotBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the loopbot binary")
	}
	buildOnce.Do(func() {
		buildPath = filepath.Join(binDir, "loopbot")
		out, err := exec.Command("go", "build", "-o", buildPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// freeAddr returns a loopback address nothing listens on, so that a restarted process can
// serve the console where the previous one did. The port is drawn below Linux's ephemeral
// range (32768-60999): a port the kernel hands out (":0", or the source port of any outgoing
// connection on the machine) could be taken again between this check and the process's
// bind, and was, when other tests ran alongside.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 100 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatal("no free loopback port between 20000 and 32000")
	return ""
}

// logBuffer is a process's stderr, which the test reads while the process writes it.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor blocks until the log holds s (counting from byte offset from), and returns the
// offset just past it.
func (b *logBuffer) waitFor(ctx context.Context, from int, s string) (int, bool) {
	for {
		b.mu.Lock()
		i := strings.Index(b.buf.String()[from:], s)
		changed := b.changed
		b.mu.Unlock()
		if i >= 0 {
			return from + i + len(s), true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return from, false
		}
	}
}

// loopbotProc is one run of the loopbot binary.
type loopbotProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	logs   *logBuffer
	exited chan struct{}
	err    error // the process's exit, once exited is closed
}

// startLoopbot starts the binary with the config and environment and waits until it says it
// is up. The process is killed at the end of the test if it is still running.
func startLoopbot(t *testing.T, bin, config string, env []string, logs *logBuffer) *loopbotProc {
	t.Helper()
	from := len(logs.String())
	cmd := exec.Command(bin, "-config", config, "serve")
	cmd.Env = env
	cmd.Stdout = io.Discard
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &loopbotProc{t: t, cmd: cmd, logs: logs, exited: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	up := make(chan bool, 1)
	go func() { _, ok := logs.waitFor(ctx, from, "loopbot is up"); up <- ok }()
	select {
	case ok := <-up:
		if !ok {
			t.Fatalf("loopbot did not come up within 30s; logs:\n%s", logs)
		}
	case <-p.exited:
		t.Fatalf("loopbot exited before it was up: %v; logs:\n%s", p.err, logs)
	}
	return p
}

// kill ends the process with SIGKILL, as a crash or the OOM killer would.
func (p *loopbotProc) kill() {
	p.t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		p.t.Fatal(err)
	}
	<-p.exited
}

// terminate sends SIGTERM and waits, at most limit, for the process to exit; it returns how
// long that took and fails the test unless the exit status is 0.
func (p *loopbotProc) terminate(limit time.Duration) time.Duration {
	p.t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(limit):
		p.t.Fatalf("loopbot still running %s after SIGTERM; logs:\n%s", limit, p.logs)
	}
	if p.err != nil {
		p.t.Fatalf("loopbot exited with %v after SIGTERM; logs:\n%s", p.err, p.logs)
	}
	return time.Since(start)
}

// consoleUsers are the people of the fault tests' consoles, each with their own token
// (given to the binary in LOOPBOT_WEB_USERS). A console with no users ignores the token.
var consoleUsers = map[string]string{
	"ann":     "ann-fault-token-0123456789",
	"bob":     "bob-fault-token-0123456789",
	"mallory": "mallory-fault-token-0123456789",
}

// consoleUsersEnv is consoleUsers as LOOPBOT_WEB_USERS writes them.
func consoleUsersEnv() string {
	var pairs []string
	for name, tok := range consoleUsers {
		pairs = append(pairs, name+"="+tok)
	}
	return strings.Join(pairs, ",")
}

// signIn makes req come from user (ann if empty), by the token the console knows them by.
func signIn(req *http.Request, user string) {
	if user == "" {
		user = "ann"
	}
	req.Header.Set("Authorization", "Bearer "+consoleUsers[user])
}

// consoleClient drives a console's JSON API and event stream over HTTP as a browser does.
type consoleClient struct {
	t   *testing.T
	url string
	// logs are the daemon's, shown when a wait fails.
	logs fmt.Stringer
}

func (c consoleClient) post(path string, body map[string]string) map[string]any {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", c.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Loopbot", "1")
	signIn(req, body["user"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		c.t.Fatalf("POST %s: %s: %s", path, resp.Status, raw)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		c.t.Fatalf("POST %s: %v: %s", path, err, raw)
	}
	return out
}

// waitFor reads the thread's event stream until a message's HTML matches re and returns the
// match; first it waits on the general stream for the thread, which a restarted console
// learns of only when the bot posts to it again.
func (c consoleClient) waitFor(thread string, re *regexp.Regexp) []string {
	c.t.Helper()
	c.stream("", func(data string) bool { return strings.Contains(data, `"`+thread+`"`) })
	var match []string
	c.stream(thread, func(data string) bool {
		var msg struct{ HTML string }
		if json.Unmarshal([]byte(data), &msg) == nil {
			match = re.FindStringSubmatch(msg.HTML)
		}
		return match != nil
	})
	return match
}

func (c consoleClient) stream(thread string, done func(data string) bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", c.url+"/api/events?thread="+thread, nil)
	signIn(req, "ann")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("event stream of thread %q: %s: %s", thread, resp.Status, body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok && done(line) {
			return
		}
	}
	c.t.Fatalf("the console's stream of thread %q ended before what the test waits for (%v)\nlogs:\n%s", thread, sc.Err(), c.logs)
}

// threadText is everything the console shows in a thread, as its JSON API serves it.
func (c consoleClient) threadText(thread string) string {
	c.t.Helper()
	return c.get("/api/threads/" + thread)
}

// get is a GET of the console's API as ann.
func (c consoleClient) get(path string) string {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.url+path, nil)
	signIn(req, "ann")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	return string(body)
}

// savedRuns opens the database of a stopped process and returns its runs, after checking
// the file's consistency.
func savedRuns(t *testing.T, path string) []*bot.RunRecord {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(context.Background()); err != nil {
		t.Errorf("database check: %v", err)
	}
	return storedRuns(t, db)
}

// storedRuns returns every run of db.
func storedRuns(t *testing.T, db bot.Store) []*bot.RunRecord {
	t.Helper()
	var runs []*bot.RunRecord
	if err := db.View(context.Background(), func(tx bot.Tx) error {
		var err error
		runs, err = tx.Runs(bot.RunFilter{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return runs
}
