package bot_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/agent/tools"
	"github.com/loopbot/loopbot/bot"
)

// bookingServer is an MCP server (the official Go SDK) whose book tool asks the user for a
// form: a room to choose, a number of people, an optional note. It returns what it got.
func bookingServer(t *testing.T) string {
	t.Helper()
	type empty struct{}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "rooms", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "book", Description: "Book a room."},
			func(ctx context.Context, req *mcp.CallToolRequest, _ empty) (*mcp.CallToolResult, any, error) {
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
					Mode: "form", Message: "Which room should I book?",
					RequestedSchema: map[string]any{
						"type": "object",
						"properties": map[string]any{
							"room":   map[string]any{"type": "string", "title": "Room", "enum": []string{"small", "large"}},
							"people": map[string]any{"type": "integer", "title": "People"},
							"note":   map[string]any{"type": "string", "title": "Note", "description": "for the front desk"},
						},
						"required": []string{"room", "people"},
					},
				})
				text := ""
				switch {
				case err != nil:
					text = "elicitation failed: " + err.Error()
				case res.Action != "accept":
					text = "the user chose to " + res.Action
				default:
					text = fmt.Sprintf("booked %v for %v (note %v)", res.Content["room"], res.Content["people"], res.Content["note"])
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
			})
		return s
	}, nil)
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return srv.URL
}

// askHarness runs a bot in real time (a bubble cannot hold network connections) whose model
// calls rooms__book once and then answers.
func askHarness(t *testing.T, cfg bot.Config) (*harness, *llmtest.Server) {
	t.Helper()
	m := tools.NewManager(tools.MCPConfig{Servers: []tools.MCPServerConfig{{Name: "rooms", URL: bookingServer(t), Risk: agent.RiskSafe}}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.Start(t.Context())
	t.Cleanup(func() { m.Close() })
	srv := llmtest.NewTest(t, llmtest.ToolCalls(llmtest.Call("rooms__book", `{}`)), llmtest.Text("Done."))
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "test-model", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.EditInterval = agent.Duration(time.Millisecond)
	return newHarnessWith(t, cfg, client, m.Tools()...), srv
}

// questionPosts are the question cards posted (not their edits), in order.
func (h *harness) questionPosts() []op {
	var out []op
	for _, o := range h.plat.sent(bot.KindQuestion) {
		if o.kind == "post" {
			out = append(out, o)
		}
	}
	return out
}

// question waits for the nth question card and returns it as it was posted.
func (h *harness) question(n int) bot.Message {
	h.t.Helper()
	h.plat.await(h.t, fmt.Sprintf("question %d", n), func() bool { return len(h.questionPosts()) >= n })
	return h.questionPosts()[n-1].msg
}

// questionShown is the nth question card as it shows now.
func (h *harness) questionShown(n int) bot.Message {
	return h.plat.shown(h.questionPosts()[n-1].ref.ID)
}

func buttonID(t *testing.T, m bot.Message, label string) string {
	t.Helper()
	for _, b := range m.Buttons {
		if b.Label == label {
			return b.ID
		}
	}
	t.Fatalf("no button %q on %+v", label, m)
	return ""
}

// TestMCPElicitationThroughTheThread: an MCP server's form is asked in the run's thread, one
// field at a time, through the real loop, store and MCP client: a choice with buttons, a
// number in words (asked again when it is not one), an optional field skipped. The server
// gets the answers; the model reads them in the server's result, with loopbot's note that it asked.
func TestMCPElicitationThroughTheThread(t *testing.T) {
	h, model := askHarness(t, bot.Config{})
	res := h.mention(ann, "book a room")

	// Required fields come first, by name: the order of a schema's properties is lost in
	// MCP's JSON object.
	people := h.question(1)
	if people.Title != "Question from MCP server rooms" || !strings.Contains(people.Text, "Which room should I book?") ||
		!strings.Contains(people.Text, "**People**") || !strings.Contains(people.Text, "Reply with a number.") {
		t.Errorf("first question = %+v", people)
	}
	// Meanwhile the status card says the run waits for a person, and not that it works.
	h.plat.await(t, "the card waiting for the answer", func() bool {
		cards := h.plat.sent(bot.KindStatus)
		return len(cards) > 0 && h.plat.shown(cards[0].ref.ID).Text == "Waiting for a reply: a question from MCP server rooms"
	})
	if card := h.plat.shown(h.plat.sent(bot.KindStatus)[0].ref.ID); card.Working {
		t.Errorf("card while the question waits = %+v, want it not working", card)
	}
	h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "lots"})
	again := h.question(2)
	if !strings.Contains(again.Text, "(lots: answer with a whole number.)") {
		t.Errorf("question asked again = %q", again.Text)
	}
	h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "4"})

	room := h.question(3)
	if !strings.Contains(room.Text, "**Room**") {
		t.Errorf("second question = %+v", room)
	}
	if got := h.click(eve, buttonID(t, room, "large")); got.Notice != "Only the person who started this run or an approver can do that." {
		t.Errorf("stranger's answer: notice %q", got.Notice)
	}
	if got := h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "medium"}); !strings.Contains(got.Notice, "reply with one of: small, large") {
		t.Errorf("a reply that is no option: notice %q", got.Notice)
	}
	if got := h.click(ann, buttonID(t, room, "large")); got.Notice != "" {
		t.Errorf("answer: notice %q", got.Notice)
	}
	if got := h.click(ann, buttonID(t, room, "small")); got.Notice != "This run is not waiting for that any more." {
		t.Errorf("second answer to the same question: notice %q", got.Notice)
	}
	// Answered, the card says how, and its buttons are gone; so for a typed answer.
	h.plat.await(t, "the answered cards", func() bool {
		return h.questionShown(3).Footer == "large: chosen by ann." &&
			h.questionShown(2).Footer == "Answered by ann."
	})
	if card := h.questionShown(3); len(card.Buttons) != 0 {
		t.Errorf("the answered card still has buttons: %+v", card.Buttons)
	}

	note := h.question(4)
	if !strings.Contains(note.Text, "**Note**: for the front desk") {
		t.Errorf("third question = %q", note.Text)
	}
	h.click(ann, buttonID(t, note, "Skip"))

	h.plat.await(t, "the answer and the finished card", func() bool {
		cards := h.plat.sent(bot.KindStatus)
		return len(h.plat.sent(bot.KindAnswer)) == 1 && h.plat.shown(cards[0].ref.ID).Text == "Done"
	})
	h.wantStatus(res.RunID, agent.StatusCompleted)
	if rec := h.run(res.RunID); rec.Asking != "" {
		t.Errorf("the finished run still notes a question from %q", rec.Asking)
	}
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests, want 2", len(reqs))
	}
	result := reqs[1].LastMessage().Content
	if !strings.Contains(result, "booked large for 4 (note <nil>)") || !strings.Contains(result, "the server asked for input from the user during this call: answered by ann") {
		t.Errorf("tool result the model read = %q", result)
	}
	// The log keeps the chosen option, and of what was typed only its length.
	var details []string
	err := h.db.View(context.Background(), func(tx bot.Tx) error {
		entries, err := tx.Audit(res.RunID)
		for _, e := range entries {
			details = append(details, e.Action+": "+e.Detail)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"question answer: a reply of 4 characters", "question answer: a reply of 1 characters", "question answer: large", "question skip: "}
	if strings.Join(details, "|") != strings.Join(want, "|") {
		t.Errorf("audit %q, want %q", details, want)
	}
}

// TestMCPElicitationDeclinedAndExpired: Decline goes to the server as a decline; a question
// nobody answers closes when it expires, the thread is told, and the server gets a cancel.
func TestMCPElicitationDeclinedAndExpired(t *testing.T) {
	t.Run("declined", func(t *testing.T) {
		h, model := askHarness(t, bot.Config{})
		h.mention(ann, "book a room")
		other := bot.ThreadRef{Platform: "test", Channel: "C1", Thread: "T2"}
		if got := h.event(bot.Event{Kind: bot.EventAction, User: ann, ActionID: buttonID(t, h.question(1), "Decline"), Thread: other}); got.Notice != "This button belongs to another thread." {
			t.Errorf("answer from another thread: notice %q", got.Notice)
		}
		h.click(ann, buttonID(t, h.question(1), "Decline"))
		h.plat.await(t, "the answer", func() bool { return len(h.plat.sent(bot.KindAnswer)) == 1 })
		if got := model.Requests()[1].LastMessage().Content; !strings.Contains(got, "the user chose to decline") || !strings.Contains(got, "declined by ann") {
			t.Errorf("tool result = %q", got)
		}
		// The question's card is edited to say so, without its buttons.
		h.plat.await(t, "the declined card", func() bool {
			card := h.questionShown(1)
			return card.Footer == "Declined by ann." && len(card.Buttons) == 0
		})
	})
	t.Run("stop", func(t *testing.T) {
		// A stop in words is never an answer: it cancels the run, and the question closes.
		h, _ := askHarness(t, bot.Config{})
		res := h.mention(ann, "book a room")
		h.question(1)
		h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "stop"})
		h.plat.await(t, "the question closed and the run cancelled", func() bool {
			return strings.Contains(h.plat.allText(), "is closed: the run was cancelled") && len(h.plat.sent(bot.KindFailure)) == 1
		})
		h.wantStatus(res.RunID, agent.StatusCancelled)
	})
	t.Run("expired", func(t *testing.T) {
		h, model := askHarness(t, bot.Config{Policy: bot.Policy{ApprovalExpiry: agent.Duration(time.Second)}})
		res := h.mention(ann, "book a room")
		h.question(1)
		h.plat.await(t, "the answer", func() bool { return len(h.plat.sent(bot.KindAnswer)) == 1 })
		if rec := h.run(res.RunID); rec.Asking != "" {
			t.Errorf("the run still notes a question from %q after it expired", rec.Asking)
		}
		if got := model.Requests()[1].LastMessage().Content; !strings.Contains(got, "the user chose to cancel") || !strings.Contains(got, "not answered") {
			t.Errorf("tool result = %q", got)
		}
		if !strings.Contains(h.plat.allText(), "The question from MCP server rooms is closed: it was not answered within 1s.") {
			t.Errorf("the thread was not told the question closed:\n%s", h.plat.allText())
		}
		h.plat.await(t, "the closed card", func() bool {
			card := h.questionShown(1)
			return card.Footer == "Closed: it was not answered within 1s." && len(card.Buttons) == 0
		})
		// A late answer finds nothing to answer.
		if got := h.click(ann, buttonID(t, h.question(1), "Decline")); got.Notice != "This run has already ended." && got.Notice != "This run is not waiting for that any more." {
			t.Errorf("late answer: notice %q", got.Notice)
		}
	})
}

// TestStaleQuestion: a question left in the store by a process that died while a call waited
// on it answers nothing. A click on it says why; a reply in its thread is handled as if no
// question waited (a note for the working run).
func TestStaleQuestion(t *testing.T) {
	bubble(t, func(t *testing.T) {
		wait := &tool{name: "wait", risk: agent.RiskSafe, block: true}
		h := newHarness(t, bot.Config{}, wait)
		h.model.add(use("wait", `{}`))
		res := h.mention(ann, "wait")
		time.Sleep(time.Second)
		err := h.db.Update(context.Background(), func(tx bot.Tx) error {
			conv, err := tx.Conversation(thread)
			if err != nil {
				return err
			}
			conv.Asking = &bot.PendingQuestion{ID: "q-old", RunID: res.RunID, From: "MCP server rooms", Text: "Which room?",
				Options: []bot.QuestionOption{{Action: "a-large", Label: "large"}}, DeclineAction: "a-decline"}
			// Eight questions closed before it: the conversation keeps the latest eight.
			for i := range 8 {
				conv.Asked = append(conv.Asked, &bot.PendingQuestion{ID: fmt.Sprintf("q-%d", i), RunID: res.RunID, Outcome: "Answered by ann."})
			}
			if err := tx.PutAction(&bot.Action{ID: "a-large", Kind: bot.ActionAnswer, RunID: res.RunID, Question: "q-old", Answer: "large"}); err != nil {
				return err
			}
			head, err := tx.RunHeader(res.RunID)
			if err != nil {
				return err
			}
			head.Asking = "MCP server rooms"
			if err := tx.PutRunHead(head); err != nil {
				return err
			}
			return tx.PutConversation(conv)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.click(ann, "a-large"); !strings.Contains(got.Notice, "This question is closed: loopbot restarted") {
			t.Errorf("click on a stale question: notice %q", got.Notice)
		}
		if rec := h.run(res.RunID); rec.Asking != "" {
			t.Errorf("the run still notes the stale question from %q", rec.Asking)
		}
		err = h.db.View(context.Background(), func(tx bot.Tx) error {
			conv, err := tx.Conversation(thread)
			if err != nil {
				return err
			}
			if n := len(conv.Asked); n != 8 || conv.Asked[0].ID != "q-1" || conv.Asked[7].ID != "q-old" || conv.Asked[7].Outcome != "Closed: loopbot restarted while it waited." {
				t.Errorf("closed questions kept: %d, first %s, last %+v", n, conv.Asked[0].ID, conv.Asked[n-1])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := h.event(bot.Event{Kind: bot.EventReply, User: ann, Text: "large"}); got.Notice != "Noted: the run will read this at its next step." {
			t.Errorf("reply with a stale question: notice %q", got.Notice)
		}
		if got := h.click(ann, "a-large"); got.Notice != "This run is not waiting for that any more." {
			t.Errorf("second click: notice %q", got.Notice)
		}
		h.event(bot.Event{Kind: bot.EventCommand, Command: bot.CommandCancel, User: ann})
		h.settle()
	})
}
