package bot_test

import (
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// BenchmarkReadableArgs writes a call's arguments as a status card shows them, which every
// render of a card does for each call of its run.
func BenchmarkReadableArgs(b *testing.B) {
	for _, bc := range []struct{ name, raw string }{
		{"one number", `{"n":0}`},
		{"a path and two numbers", `{"path":"internal/pkg/file.go","start":1,"end":200}`},
	} {
		raw := bc.raw
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if bot.ReadableArgs(raw, 300) == raw {
					b.Fatal("shown as sent")
				}
			}
		})
	}
}
