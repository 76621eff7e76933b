package discord

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/agent/llm/llmtest"
	"github.com/loopbot/loopbot/bot"
)

// TestDecodeModalSubmit reads the captured MODAL_SUBMIT of a reason modal into the click it
// stands for, with the typed reason.
func TestDecodeModalSubmit(t *testing.T) {
	raw, err := os.ReadFile("testdata/modal_submit.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		Interaction json.RawMessage `json:"interaction"`
	}
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	in, err := decodeInteraction(fx.Interaction)
	if err != nil {
		t.Fatal(err)
	}
	ev := in.ev
	if ev.Kind != bot.EventAction || ev.ActionID != "rej0ectid" || ev.Text != "Deploy to staging first, not prod." ||
		ev.ID != "1095661440997806172" || ev.User.ID != "290483761559240704" || ev.Thread.Channel != "1016614538398937098" {
		t.Fatalf("decoded %+v", ev)
	}
	if r := deferredResponse(in); r.Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Errorf("a submission is answered with %d, want a deferred update", r.Type)
	}
	// Another application's modal is not loopbot's.
	other := discordfake.ModalSubmitPayload("1095661440997806173", "tok", "TH1", discordfake.Channel, "autoPings;add;match", "texts", "x", "U1")
	b, _ := json.Marshal(other)
	if _, err := decodeInteraction(b); err != errIgnored {
		t.Errorf("another modal: err %v, want errIgnored", err)
	}
}

// TestReasonButtonOpensModal: a click on a button drawn to ask for a reason is answered with
// the modal (golden file), not handed to the bot; a plain button is a deferred update.
func TestReasonButtonOpensModal(t *testing.T) {
	parts := render(bot.Message{Kind: bot.KindApproval, Title: "Approve shell?", Buttons: []bot.Button{
		{ID: "onceid", Label: "Approve once"}, {ID: "rejstopid", Label: "Reject and stop", Reason: bot.ReasonLabel}}})
	row := parts[0].Components[0].(discordgo.ActionsRow)
	ids := []string{row.Components[0].(discordgo.Button).CustomID, row.Components[1].(discordgo.Button).CustomID}
	if ids[0] != "onceid" || ids[1] != "r:rejstopid" {
		t.Fatalf("custom_ids %v", ids)
	}
	msg := map[string]any{"id": "M1", "channel_id": "TH1", "components": []any{map[string]any{"type": 1, "components": []any{
		map[string]any{"type": 2, "style": 4, "label": "Reject and stop", "custom_id": "r:rejstopid"}}}}}
	p := discordfake.ButtonPayload("1095661440997806174", "tok", "TH1", discordfake.Channel, "M1", "r:rejstopid", "U1")
	p["message"] = msg
	b, _ := json.Marshal(p)
	in, err := decodeInteraction(b)
	if err != nil {
		t.Fatal(err)
	}
	if in.ev.ActionID != "rejstopid" || in.modal == nil {
		t.Fatalf("decoded %+v, modal %+v", in.ev, in.modal)
	}
	got, err := json.MarshalIndent(deferredResponse(in), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "reason_modal", append(got, '\n'))
	p = discordfake.ButtonPayload("1095661440997806175", "tok", "TH1", discordfake.Channel, "M1", "onceid", "U1")
	b, _ = json.Marshal(p)
	if in, err := decodeInteraction(b); err != nil || in.modal != nil || deferredResponse(in).Type != discordgo.InteractionResponseDeferredMessageUpdate {
		t.Fatalf("plain button: %+v, %v", in, err)
	}
}

// TestE2ERejectWithReason: through the gateway, the real bot and store, Reject opens the
// modal; its submission rejects the call with the reason, which reaches the model's next
// request and the edited card.
func TestE2ERejectWithReason(t *testing.T) {
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)}, approvalScript()...)
	e.start(t)
	thread, card := startApproval(t, e)
	reject := buttonIDs(card)["Reject"]
	if !strings.HasPrefix(reject, reasonPrefix) {
		t.Fatalf("Reject is drawn as %q, not as a button that asks for a reason", reject)
	}
	token := e.click(t, thread, card.ID, reject, discordfake.UserID)
	cb := e.f.WaitFor(t, "the modal", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "POST", "/api/v9/interactions/*/"+token+"/callback")) == 1
	})
	modal := discordfake.Find(cb, "POST", "/api/v9/interactions/*/"+token+"/callback")[0].Body
	data, _ := modal["data"].(map[string]any)
	if modal["type"] != float64(9) || data["custom_id"] != modalPrefix+strings.TrimPrefix(reject, reasonPrefix) {
		t.Fatalf("click answered with %+v, want the reason modal", modal)
	}
	id, tok := e.f.Interaction()
	e.f.Dispatch(t, "INTERACTION_CREATE", discordfake.ModalSubmitPayload(id, tok, thread, discordfake.Channel,
		data["custom_id"].(string), reasonInput, "prod is frozen this week", discordfake.UserID))
	waitUntil(t, "the decided card", func() bool {
		m, _ := e.f.Message(card.ID)
		return strings.Contains(description(m), "Reason: prod is frozen this week")
	})
	waitUntil(t, "the model's next request", func() bool { return len(e.llm.Requests()) == 2 })
	if last := e.llm.Requests()[1].LastMessage(); !strings.Contains(last.Content, "prod is frozen this week") {
		t.Fatalf("the model's next request ends with %+v, want the reason", last)
	}
	if e.tool.calls.Load() != 0 {
		t.Fatal("the rejected call ran")
	}
}

// TestGrantsCommand: /loopbot-grants asks for the channel's grants, answered privately.
func TestGrantsCommand(t *testing.T) {
	b, _ := json.Marshal(discordfake.SlashPayload("1095661440997806176", "tok", "TH1", discordfake.Channel, cmdGrants))
	in, err := decodeInteraction(b)
	if err != nil || in.ev.Kind != bot.EventCommand || in.ev.Command != bot.CommandGrants || !in.private || in.ev.Thread.Thread != "TH1" {
		t.Fatalf("decoded %+v, %v", in, err)
	}
}

// TestE2EApproveForTheRun: through the gateway, the real bot and store, Approve for this run
// lets the run's second deploy go without a second card, and the decided card says so.
func TestE2EApproveForTheRun(t *testing.T) {
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)},
		llmtest.ToolCalls(llmtest.Call("deploy", `{"version":"1.2"}`)),
		llmtest.ToolCalls(llmtest.Call("deploy", `{"version":"1.3"}`)),
		llmtest.Text("Deployed v1.2 and v1.3."))
	e.start(t)
	thread, card := startApproval(t, e)
	e.click(t, thread, card.ID, buttonIDs(card)["Approve for this run"], discordfake.UserID)
	waitUntil(t, "the answer", func() bool {
		_, ok := e.answer(thread, "Deployed v1.2 and v1.3.")
		return ok
	})
	if n := e.tool.calls.Load(); n != 2 {
		t.Fatalf("deploy ran %d times, want 2", n)
	}
	cards := 0
	for _, m := range e.f.ChannelMessages(thread) {
		if title, _ := embed(m)["title"].(string); strings.HasPrefix(title, "deploy: ") || title == "Approve deploy?" {
			cards++
		}
	}
	decided, _ := e.f.Message(card.ID)
	if cards != 1 || !strings.Contains(description(decided), "run without asking in this run") {
		t.Fatalf("%d approval cards, decided card %q; want one card that says the grant", cards, description(decided))
	}
}

// TestGatewayGrantsMention: "@loopbot grants" in a channel asks for the channel's grants
// there, opening no thread; in a thread, there.
func TestGatewayGrantsMention(t *testing.T) {
	f := NewFakeDiscord(t)
	rec := newRecorder(f)
	startGateway(t, f, rec)
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1210", discordfake.Channel, "<@"+discordfake.BotID+"> grants", discordfake.BotID))
	ev := rec.next(t)
	if ev.Kind != bot.EventCommand || ev.Command != bot.CommandGrants || ev.Thread.Thread != discordfake.Channel {
		t.Fatalf("grants mention %+v", ev)
	}
	if got := discordfake.Find(f.Requests(), "POST", "/api/v9/channels/"+discordfake.Channel+"/messages/1210/threads"); len(got) != 0 {
		t.Error("a thread was started for the grants command")
	}
	f.AddChannel(map[string]any{"id": "1300", "type": 11, "parent_id": discordfake.Channel, "owner_id": discordfake.UserID})
	f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1301", "1300", "<@"+discordfake.BotID+"> Grants", discordfake.BotID))
	if ev = rec.next(t); ev.Kind != bot.EventCommand || ev.Command != bot.CommandGrants || ev.Thread.Thread != "1300" || ev.Thread.Channel != discordfake.Channel {
		t.Fatalf("grants mention in a thread %+v", ev)
	}
}
