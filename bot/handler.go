package bot

import "context"

// Handler takes the events an adapter decodes; *Bot is the one loopbot runs. It is declared
// here, once, because every adapter consumes the same method and the bot is its only
// implementation outside tests.
//
// Handle must be fast, store writes only: an adapter calls it after it has acknowledged the
// platform's delivery, and other deliveries (or a waiting browser) are queued behind it. The
// Result's notice is what the adapter shows the acting person; an error is logged by the
// adapter and summarised to that person.
type Handler interface {
	Handle(ctx context.Context, ev Event) (Result, error)
}

var _ Handler = (*Bot)(nil)
