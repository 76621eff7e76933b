package bot

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Commands said in words. "@loopbot remember ...", "/loopbot memory" and the like reach the
// bot as a mention or a start command whose text begins with the command's word, on every
// platform alike; in a reply (the web console's thread box) the word must follow
// "/loopbot ", so that a person's note to a run is never taken for a command.

// chat command words.
const (
	verbRemember  = "remember"
	verbMemory    = "memory"
	verbPlaybooks = "playbooks"
	verbRun       = "run"
	verbSanity    = "sanity"
)

// chatCommand is a command read from an event's text.
type chatCommand struct {
	verb string
	// arg is the text after the word.
	arg string
}

// readCommand reads a command from ev's text, if it holds one.
func (b *Bot) readCommand(ev Event) (chatCommand, bool) {
	switch {
	case ev.Kind == EventMention, ev.Kind == EventReply, ev.Kind == EventCommand && ev.Command == CommandStart:
	default:
		return chatCommand{}, false
	}
	text := strings.TrimSpace(ev.Text)
	explicit := false
	if w, rest, _ := strings.Cut(text, " "); strings.EqualFold(w, "/loopbot") {
		text, explicit = strings.TrimSpace(rest), true
	}
	// A slash command is a command already.
	explicit = explicit || ev.Kind == EventCommand
	if ev.Kind == EventReply && !explicit {
		return chatCommand{}, false
	}
	word, rest, _ := strings.Cut(text, " ")
	c := chatCommand{verb: strings.ToLower(word), arg: strings.TrimSpace(rest)}
	switch c.verb {
	case verbRemember:
		return c, true
	case verbMemory, verbPlaybooks, verbSanity:
		// "memory" alone is the command; "memory leaks in the parser" is a goal.
		return c, c.arg == ""
	case verbRun:
		// "/loopbot run NAME" always names a playbook; "@loopbot run the tests" is a goal
		// unless a playbook has that name.
		return c, explicit || b.isPlaybook(c.arg)
	}
	return chatCommand{}, false
}

// command handles a command read from an event's text.
func (b *Bot) command(ctx context.Context, ev Event, c chatCommand) (Result, error) {
	switch c.verb {
	case verbRemember:
		return b.rememberCommand(ctx, ev, c.arg)
	case verbMemory:
		return b.memoryCommand(ctx, ev)
	case verbPlaybooks:
		return b.playbooksCommand(ev), nil
	case verbRun:
		return b.runPlaybook(ctx, ev, c.arg)
	case verbSanity:
		return b.sanityCommand(ctx, ev)
	}
	return Result{}, fmt.Errorf("unknown command %q", c.verb)
}

// isPlaybook reports whether the first word of arg names a playbook file.
func (b *Bot) isPlaybook(arg string) bool {
	name, _, _ := strings.Cut(arg, " ")
	if b.cfg.Playbooks.Dir == "" || !playbookName.MatchString(name) {
		return false
	}
	_, err := os.Stat(filepath.Join(b.cfg.Playbooks.Dir, name+".md"))
	return err == nil
}
