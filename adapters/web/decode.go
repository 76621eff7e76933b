package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/loopbot/loopbot/bot"
)

// userPrefix makes console users' IDs distinct from every other platform's.
const userPrefix = "web:"

// request is the JSON body of every POST. ID is a UUID the page makes for the submission
// and keeps until it succeeds, so a double submit or a retry is one delivery to the bot.
// User is accepted and ignored: pages once sent a name there, and who acts is decided by
// the request's credential only.
type request struct {
	ID     string `json:"id"`
	User   string `json:"user,omitempty"`
	Text   string `json:"text,omitempty"`
	Thread string `json:"thread,omitempty"`
	Action string `json:"action,omitempty"`
}

// decodeRequest decodes a POST body into an event of kind by who, without its thread (the
// handler decides it). For an action it also returns the thread the clicked card is in.
// Errors say what is wrong in words a person can act on.
func decodeRequest(body []byte, kind bot.EventKind, who identity) (bot.Event, string, error) {
	var req request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return bot.Event{}, "", fmt.Errorf("body is not the expected JSON object: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return bot.Event{}, "", errors.New("body has data after the JSON object")
	}
	if !validDeliveryID(req.ID) {
		return bot.Event{}, "", errors.New("id: want the submission's UUID (8 to 64 letters, digits and dashes)")
	}
	if who.name == "" {
		return bot.Event{}, "", errors.New("no signed-in user")
	}
	ev := bot.Event{Kind: kind, ID: userPrefix + req.ID, User: who.user()}
	switch kind {
	case bot.EventMention, bot.EventReply:
		if req.Action != "" || req.Thread != "" {
			return bot.Event{}, "", errors.New("a message has text only, no action or thread")
		}
		ev.Text = strings.TrimSpace(req.Text)
		if ev.Text == "" {
			return bot.Event{}, "", errors.New("text: required")
		}
		if !utf8.ValidString(ev.Text) {
			return bot.Event{}, "", errors.New("text: not valid UTF-8")
		}
		if level, ok := consoleAutonomy(ev.Text); ok {
			ev.Kind, ev.Command, ev.Text = bot.EventCommand, bot.CommandAutonomy, level
		}
		return ev, "", nil
	case bot.EventAction:
		if req.Text != "" {
			return bot.Event{}, "", errors.New("an action has no text")
		}
		if req.Action == "" || len(req.Action) > 64 || strings.ContainsFunc(req.Action, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
			return bot.Event{}, "", errors.New("action: want the button's ID")
		}
		if !validThreadID(req.Thread) {
			return bot.Event{}, "", errors.New("thread: want the ID of the thread the button is in")
		}
		ev.ActionID = req.Action
		return ev, req.Thread, nil
	}
	return bot.Event{}, "", fmt.Errorf("unknown event kind %q", kind)
}

// validDeliveryID reports whether id can be a submission's ID.
func validDeliveryID(id string) bool {
	if len(id) < 8 || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
