package web_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/loopbot/loopbot/adapters/web"
	"github.com/loopbot/loopbot/bot"
	"github.com/loopbot/loopbot/store"
)

// BenchmarkConsolePost is one card posted and edited twice, as the dispatcher does, on a
// console that keeps its view in a history file (the single process before) and in the
// bbolt store (every console now, whose writes are commits).
func BenchmarkConsolePost(b *testing.B) {
	for _, mode := range []string{"history", "bbolt"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			opts := []web.Option{web.WithHistory(filepath.Join(dir, "bot.db.console"), 0)}
			if mode == "bbolt" {
				db, err := store.Open(filepath.Join(dir, "bot.db"))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				opts = append(opts, web.WithViewStore(db))
			}
			con, err := web.New(web.Config{MaxThreads: 1000}, opts...)
			if err != nil {
				b.Fatal(err)
			}
			defer con.Close()
			ctx := context.Background()
			th := bot.ThreadRef{Platform: web.PlatformName, Channel: "console", Thread: "bench"}
			for b.Loop() {
				ref, err := con.Post(ctx, th, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: "Working"})
				if err != nil {
					b.Fatal(err)
				}
				for _, text := range []string{"Step 1", "Step 2"} {
					if err := con.Update(ctx, ref, bot.Message{Kind: bot.KindStatus, Title: "deploy the site", Text: text}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
