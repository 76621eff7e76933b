package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// The damaged-database cases of the fault suite: a file cut short or with pages
// overwritten used to end the daemon with a SIGBUS or one of bbolt's assertion panics, and
// one outbox record that did not decode made the dispatcher fail every pass, so the bot
// never posted again.

// answeredOnce runs the binary until one goal is answered, and stops it, leaving a database
// with a run, a conversation and audit entries in it.
func answeredOnce(t *testing.T, bin string, s faultSetup, goal string) (thread, shown string) {
	t.Helper()
	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	thread = c.post("/api/threads", map[string]string{"id": uuid(1), "user": "ann", "text": goal})["thread"].(string)
	c.waitFor(thread, regexp.MustCompile(`Answered\.`))
	shown = c.threadText(thread)
	p.terminate(25 * time.Second)
	return thread, shown
}

// TestFaultDamagedDatabaseAtStart damages the database of a stopped daemon in three ways and
// starts it on each: it exits non-zero at once with an error naming the file and what to do,
// never a crash, and `loopbot db check` fails on it too; with the file restored it starts.
func TestFaultDamagedDatabaseAtStart(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Text("Answered."))
	s := newFaultSetup(t, model, fastEdits)
	_, shown := answeredOnce(t, bin, s, "first goal")
	good, err := os.ReadFile(s.db)
	if err != nil {
		t.Fatal(err)
	}
	pages := highWater(good)
	overwrite := func(data []byte, flag uint16) []byte {
		n := 0
		for off := 2 * 4096; off < pages*4096; off += 4096 {
			if binary.LittleEndian.Uint16(data[off+8:]) == flag {
				for i := off + 8; i < off+4096; i++ {
					data[i] = 0xa5
				}
				n++
			}
		}
		if n == 0 {
			t.Fatalf("no page with flags %#x", flag)
		}
		return data
	}
	damages := []struct {
		name   string
		damage func(data []byte) []byte
	}{
		{"cut short", func(data []byte) []byte { return data[:(pages-1)*4096] }},
		{"leaf pages overwritten", func(data []byte) []byte { return overwrite(data, 0x02) }},
		{"free list overwritten", func(data []byte) []byte { return overwrite(data, 0x10) }},
	}
	var stderrs []string
	for _, d := range damages {
		if err := os.WriteFile(s.db, d.damage(append([]byte(nil), good...)), 0o600); err != nil {
			t.Fatal(err)
		}
		stderr := serveMustFail(t, bin, s, "loopbot on a database with "+d.name)
		stderrs = append(stderrs, stderr)
		for _, want := range []string{"loopbot: database file is damaged: " + s.db, "restore it from a backup", "loopbot db check"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr does not say %q:\n%s", d.name, want, stderr)
			}
		}
		for _, crash := range []string{"SIGBUS", "SIGSEGV", "goroutine ", "fatal error"} {
			if strings.Contains(stderr, crash) {
				t.Errorf("%s: the daemon crashed:\n%s", d.name, stderr)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "-config", s.config, "db", "check")
		cmd.Env = s.env
		out, err := cmd.CombinedOutput()
		cancel()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "damaged") {
			t.Errorf("%s: db check: %v, want exit status 1 saying the file is damaged:\n%s", d.name, err, out)
		}
	}

	if err := os.WriteFile(s.db, good, 0o600); err != nil {
		t.Fatal(err)
	}
	_, shown2 := answeredOnce(t, bin, s, "after the restore")
	invariants{db: s.db, goals: []string{"first goal", "after the restore"}, shown: []string{shown, shown2},
		logs: strings.Join(stderrs, "\n"), settled: true}.check(t)
}

// TestFaultCorruptOutboxRecord puts an outbox item that does not decode next to one that
// does into a stopped daemon's database: restarted, the daemon posts the good one and
// answers a new goal, and says once, in its log and in /metrics, that it quarantined the bad
// one.
func TestFaultCorruptOutboxRecord(t *testing.T) {
	bin := loopbotBinary(t)
	model := llmtest.NewTest(t)
	model.SetFallback(llmtest.Text("Answered."))
	s := newFaultSetup(t, model, fastEdits)
	thread, shown := answeredOnce(t, bin, s, "first goal")

	runs := savedRuns(t, s.db)
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1", len(runs))
	}
	good, err := json.Marshal(bot.OutboxItem{Key: "notice/good", Kind: bot.OutboxNotice, Thread: runs[0].Thread,
		Text: "Posted past the bad item.", CreatedAt: time.Now().Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	bdb, err := bolt.Open(s.db, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(btx *bolt.Tx) error {
		outbox := btx.Bucket([]byte("outbox"))
		// Sorted first, and older: the dispatcher meets it before the good one.
		return errors.Join(outbox.Put([]byte("notice/bad"), []byte(`{"key":"notice/bad","created_at":"yesterday"}`)),
			outbox.Put([]byte("notice/good"), good))
	})
	if err := errors.Join(err, bdb.Close()); err != nil {
		t.Fatal(err)
	}

	logs := newLogBuffer()
	c := consoleClient{t: t, url: "http://" + s.web, logs: logs}
	p := startLoopbot(t, bin, s.config, s.env, logs)
	c.waitFor(thread, regexp.MustCompile(`Posted past the bad item\.`))
	shown += c.threadText(thread)
	th2 := c.post("/api/threads", map[string]string{"id": uuid(2), "user": "ann", "text": "second goal"})["thread"].(string)
	c.waitFor(th2, regexp.MustCompile(`Answered\.`))
	shown += c.threadText(th2)

	var f adminFile
	data, err := os.ReadFile(adminFilePath(s.db))
	if err != nil || json.Unmarshal(data, &f) != nil {
		t.Fatalf("admin file: %v", err)
	}
	if m := get(t, "http://"+f.Addr+"/metrics"); !strings.Contains(m, `loopbot_store_quarantined_total{bucket="outbox"} 1`) {
		t.Errorf("/metrics does not count the quarantined item:\n%s", grepLines(m, "quarantined"))
	}
	p.terminate(25 * time.Second)

	log := logs.String()
	if n := strings.Count(log, "moved to the quarantine"); n != 1 || !strings.Contains(log, `key="\"notice/bad\""`) {
		t.Errorf("the log says %d times that a record was quarantined, want once naming notice/bad:\n%s", n, log)
	}
	if strings.Contains(log, "read outbox") {
		t.Errorf("the dispatcher failed to read the outbox:\n%s", log)
	}
	invariants{db: s.db, goals: []string{"first goal", "second goal"}, shown: []string{shown}, logs: log, settled: true}.check(t)
	cmd := exec.Command(bin, "-config", s.config, "db", "check")
	cmd.Env = s.env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "quarantined: 1 records") || !strings.Contains(string(out), `"notice/bad"`) ||
		strings.Contains(string(out), "yesterday") {
		t.Errorf("db check: %v, want it to pass and list the quarantined item by key only:\n%s", err, out)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
