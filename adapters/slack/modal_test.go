package slack

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/loopbot/loopbot/adapters/slack/slackfake"
	"github.com/loopbot/loopbot/bot"
)

// TestDecodeSubmission reads the captured view_submission of a reason modal into the click
// it stands for, and leaves other views and broken ones alone.
func TestDecodeSubmission(t *testing.T) {
	ev, ok, err := decodeInteraction(fixture(t, "events/view_submission.json"))
	if err != nil || !ok {
		t.Fatalf("decode: ok %v, err %v", ok, err)
	}
	want := bot.Event{Kind: bot.EventAction, ID: "view:V0PKB1ZFV", ActionID: "rej0ectid",
		Thread: bot.ThreadRef{Platform: platform, Workspace: "T1", Channel: "C1", Thread: "1700000000.000100"},
		User:   bot.User{ID: "U1", Name: "ann"}, Text: "Deploy to staging first, not prod."}
	if ev != want {
		t.Fatalf("decoded %+v\nwant    %+v", ev, want)
	}
	for name, body := range map[string]string{
		"another view": `{"type":"view_submission","user":{"id":"U1"},"view":{"id":"V1","callback_id":"other","private_metadata":"x"}}`,
	} {
		if _, ok, err := decodeInteraction([]byte(body)); ok || err != nil {
			t.Errorf("%s: ok %v, err %v, want ignored", name, ok, err)
		}
	}
	for name, body := range map[string]string{
		"metadata not ours": `{"type":"view_submission","user":{"id":"U1"},"view":{"id":"V1","callback_id":"loopbot_reason","private_metadata":"x"}}`,
		"no thread":         `{"type":"view_submission","user":{"id":"U1"},"view":{"id":"V1","callback_id":"loopbot_reason","private_metadata":"{\"a\":\"x\"}"}}`,
	} {
		if _, ok, err := decodeInteraction([]byte(body)); ok || err == nil {
			t.Errorf("%s: ok %v, err %v, want an error", name, ok, err)
		}
	}
}

// TestReasonView: the modal a Reject click opens, against its golden file.
func TestReasonView(t *testing.T) {
	view, err := reasonView(reasonClick{TriggerID: "trig", Label: "Reject and stop",
		Meta: reasonMeta{Action: "rej0ectid", Team: "T1", Channel: "C1", Thread: "1700000000.000100"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(view, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "reason_modal", string(b)+"\n")
	if _, err := reasonView(reasonClick{Meta: reasonMeta{Action: strings.Repeat("x", maxModalMetadata)}}); err == nil {
		t.Error("metadata over Slack's limit: no error")
	}
}

// TestAskedReason: only a click on a button drawn to ask for a reason, with a trigger_id,
// opens the modal; anything else is a plain click.
func TestAskedReason(t *testing.T) {
	ev := bot.Event{ActionID: "rej0ectid", Thread: bot.ThreadRef{Workspace: "T1", Channel: "C1", Thread: "1.2"}}
	click := func(trigger, actionID string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": trigger,
			"actions": []any{map[string]any{"action_id": actionID, "value": "rej0ectid", "text": map[string]any{"text": "Reject"}}}})
		return b
	}
	if rc, ok := askedReason(click("trig", reasonActionID(3)), ev); !ok || rc.TriggerID != "trig" || rc.Label != "Reject" || rc.Meta.Action != "rej0ectid" {
		t.Errorf("reason button: %+v %v", rc, ok)
	}
	if _, ok := askedReason(click("", reasonActionID(3)), ev); ok {
		t.Error("no trigger_id: a modal was asked for")
	}
	if _, ok := askedReason(click("trig", actionID(3)), ev); ok {
		t.Error("plain button: a modal was asked for")
	}
}

// openedModal returns the view of a views.open call the fake recorded.
func openedModal(t *testing.T, c call) (trigger string, view slack.ModalViewRequest) {
	t.Helper()
	var req struct {
		TriggerID string                 `json:"trigger_id"`
		View      slack.ModalViewRequest `json:"view"`
	}
	if err := json.Unmarshal([]byte(c.Values.Get("body")), &req); err != nil {
		t.Fatalf("views.open body %q: %v", c.Values.Get("body"), err)
	}
	return req.TriggerID, req.View
}

// TestHTTPReasonModal: over HTTP, a click on Reject opens the modal with the click's
// trigger_id and reaches the bot only when the modal is submitted, with the reason; when
// views.open fails, the click reaches the bot as it is.
func TestHTTPReasonModal(t *testing.T) {
	f := newFakeSlack(t)
	rec := newRecorder()
	base := serveHTTP(t, f, rec)
	send := func(payload map[string]any) {
		t.Helper()
		p, _ := json.Marshal(payload)
		body := url.Values{"payload": {string(p)}}.Encode()
		if status, got := post(t, base+PathInteractions, "application/x-www-form-urlencoded", body, sign(body, time.Now(), secret)); status != http.StatusOK || got != "" {
			t.Fatalf("interaction: %d %q", status, got)
		}
	}
	click := slackfake.Click{TriggerID: "trig-r", UserID: "U2", UserName: "bea", Channel: "C1", ThreadTS: "1700000000.000100",
		MessageTS: "1700000001.000200", Value: "opaque-reject", ActionTS: "1700000002.000300", ActionID: reasonActionID(3), Label: "Reject"}
	send(slackfake.ClickPayload(click))
	trigger, view := openedModal(t, f.nextCall("views.open"))
	if trigger != "trig-r" || view.CallbackID != reasonCallback || view.Submit.Text != "Reject" {
		t.Fatalf("views.open with trigger %q, view %+v", trigger, view)
	}
	rec.none(t)
	send(slackfake.SubmissionPayload(slackfake.Submission{ViewID: "V0000001", UserID: "U2", UserName: "bea", CallbackID: view.CallbackID,
		PrivateMetadata: view.PrivateMetadata, Values: map[string]map[string]string{reasonBlock: {reasonInput: "wrong cluster"}}}))
	ev := rec.next(t)
	if ev.Kind != bot.EventAction || ev.ActionID != "opaque-reject" || ev.Text != "wrong cluster" || ev.User.ID != "U2" ||
		ev.Thread != (bot.ThreadRef{Platform: platform, Workspace: teamID, Channel: "C1", Thread: "1700000000.000100"}) {
		t.Fatalf("submission handled as %+v", ev)
	}

	// A modal that cannot open: the click counts as a plain Reject.
	f.FailNext("views.open", 1, slackfake.Failure{Body: `{"ok":false,"error":"expired_trigger_id"}`})
	click.TriggerID = "trig-s"
	send(slackfake.ClickPayload(click))
	if ev := rec.next(t); ev.ActionID != "opaque-reject" || ev.Text != "" || ev.ID != "action:trig-s" {
		t.Fatalf("click after a failed views.open handled as %+v", ev)
	}
}

// buttonActionID returns the action_id of the button labelled label in a posted message.
func buttonActionID(t *testing.T, c call, label string) string {
	t.Helper()
	var blocks []struct {
		Type     string            `json:"type"`
		Elements []json.RawMessage `json:"elements"`
	}
	if err := json.Unmarshal([]byte(c.Values.Get("blocks")), &blocks); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		for _, raw := range b.Elements {
			var el struct {
				ActionID string `json:"action_id"`
				Text     struct {
					Text string `json:"text"`
				} `json:"text"`
			}
			if b.Type == "actions" && json.Unmarshal(raw, &el) == nil && el.Text.Text == label {
				return el.ActionID
			}
		}
	}
	t.Fatalf("no %q button", label)
	return ""
}

// TestE2ERejectWithReason: through Socket Mode, the real bot and store, Reject opens the
// modal; its submission rejects the call with the reason, which reaches the model's next
// request and the edited card.
func TestE2ERejectWithReason(t *testing.T) {
	e, _, ap, _ := approvalFlow(t)
	post := e.log.waitCall(t, "the approval card", 1, "chat.postMessage", approvalCard)
	value, id := buttonValue(t, post, "Reject"), buttonActionID(t, post, "Reject")
	if !strings.HasPrefix(id, reasonPrefix) {
		t.Fatalf("Reject is drawn as %q, not as a button that asks for a reason", id)
	}
	e.f.send("interactive", "env-r", slackfake.ClickPayload(slackfake.Click{TriggerID: "trig-r", UserID: "U1", UserName: "ann",
		Channel: "C1", ThreadTS: rootTS, MessageTS: ap.Card.ID, Value: value, ActionTS: "1700000300.000100", ActionID: id, Label: "Reject"}))
	e.f.nextAck()
	_, view := openedModal(t, e.f.nextCall("views.open"))
	e.f.send("interactive", "env-s", slackfake.SubmissionPayload(slackfake.Submission{ViewID: "V0000001", UserID: "U1", UserName: "ann",
		CallbackID: view.CallbackID, PrivateMetadata: view.PrivateMetadata,
		Values: map[string]map[string]string{reasonBlock: {reasonInput: "prod is frozen this week"}}}))
	e.f.nextAck()
	if h := e.handled(); h.ev.Text != "prod is frozen this week" || h.res.Notice != "" {
		t.Fatalf("submission handled as %+v, %+v", h.ev, h.res)
	}
	e.log.waitCall(t, "the answer", 1, "chat.postMessage", answer)
	e.log.waitCall(t, "the card's edit", 1, "chat.update", and(at(ap.Card.ID), blocksHave("Reason: prod is frozen this week")))
	reqs := e.model.Requests()
	if len(reqs) != 2 || !strings.Contains(reqs[1].LastMessage().Content, "prod is frozen this week") {
		t.Fatalf("the model's next request lacks the reason: %+v", reqs)
	}
	if e.tool.count() != 0 {
		t.Fatal("the rejected call ran")
	}
}
