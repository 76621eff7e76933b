package bot_test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loopbot/loopbot/bot"
)

// card is about 2 KB of a status card: a plan, a few tool lines in Markdown, one secret.
func card() string {
	var b strings.Builder
	b.WriteString("*Working on:* deploy the billing service to staging\n\n")
	for i := 0; b.Len() < 1900; i++ {
		fmt.Fprintf(&b, "• [x] step %d: run `kubectl get pods -n billing` and check the _ready_ count (%d/3)\n", i, i%4)
	}
	b.WriteString("token: " + githubToken + "\n")
	return b.String()
}

// toolOutput is about 40 KB of what a shell tool returns: a listing, JSON log lines and an
// environment, two secrets among them.
func toolOutput() string {
	var b strings.Builder
	for i := 0; b.Len() < 40_000; i++ {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&b, "-rw-r--r-- 1 app app %6d Nov 25 09:%02d src/billing/invoice_%03d.go\n", 1000+i*37, i%60, i)
		case 1:
			fmt.Fprintf(&b, `{"level":"info","ts":"2026-11-25T09:00:%02dZ","msg":"request done","path":"/api/v1/items/%d","status":200,"user_agent":"curl/8.5"}`+"\n", i%60, i)
		case 2:
			fmt.Fprintf(&b, "HOME=/home/app PATH=/usr/local/bin:/usr/bin LANG=C.UTF-8 WORKER_%d=idle MAX_TOKENS=4096\n", i)
		case 3:
			fmt.Fprintf(&b, "func (s *Server) handle%d(ctx context.Context, req *Request) error { return s.next(ctx, req) }\n", i)
		}
	}
	b.WriteString("DB_PASSWORD=hunter2hunter2\nSTRIPE=" + stripeKey + "\n")
	return b.String()
}

// cpuTime is the processor time the process has used, all threads together.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkRedact(b *testing.B) {
	r := bot.NewRedactor([]string{configuredSecret, specialSecret, "xoxb-1234567890-configured-slack-token", "sk-configured-openai-key-0123456789"})
	for _, c := range []struct {
		name, text string
	}{{"card-2KB", card()}, {"tool-output-40KB", toolOutput()}} {
		b.Run(c.name, func(b *testing.B) {
			if out := r.Redact(c.text); !strings.Contains(out, "[redacted]") {
				b.Fatal("the benchmark text has no secret found")
			}
			b.SetBytes(int64(len(c.text)))
			b.ReportAllocs()
			// CPU time too: on a shared machine the wall time per op mostly measures the
			// other processes.
			before := cpuTime()
			for b.Loop() {
				r.Redact(c.text)
			}
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// BenchmarkRedactLabels redacts what most of a card is: short texts that hold no keyword of
// any rule (a footer, a button label, a status line), each redacted on its own.
func BenchmarkRedactLabels(b *testing.B) {
	r := bot.NewRedactor([]string{configuredSecret})
	labels := []string{"Step 4 · 1m12s · 12480 tokens · $0.0310", "Cancel", "Working: list_files", "Approve for this run"}
	for _, l := range labels {
		if out := r.Redact(l); out != l {
			b.Fatalf("Redact(%q) = %q, want it unchanged", l, out)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range labels {
			r.Redact(l)
		}
	}
}
