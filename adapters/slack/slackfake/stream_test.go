package slackfake

import (
	"strings"
	"testing"

	"github.com/slack-go/slack"
)

// TestStreams drives the streaming methods with slack-go: a stream in a channel needs its
// recipient, appends and stops go to an open stream only, text over Slack's limit is
// refused, and RefuseStreams refuses new streams.
func TestStreams(t *testing.T) {
	s := newServer(t)
	api := slack.New("xoxb-test", slack.OptionAPIURL(s.APIURL()))
	ctx := ctxT(t)
	errCode := func(err error) string {
		if se, ok := err.(slack.SlackErrorResponse); ok {
			return se.Err
		}
		if err != nil {
			return err.Error()
		}
		return ""
	}

	_, _, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS("1.1"), slack.MsgOptionMarkdownText("hi"))
	if c := errCode(err); c != "missing_recipient_team_id" {
		t.Errorf("a channel stream without its recipient: %q", c)
	}
	_, ts, err := api.StartStreamContext(ctx, "C1", slack.MsgOptionTS("1.1"), slack.MsgOptionRecipientTeamID(TeamID),
		slack.MsgOptionRecipientUserID(UserID), slack.MsgOptionMarkdownText("Hello "))
	if err != nil || ts == "" {
		t.Fatalf("startStream: %q, %v", ts, err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText("world"),
		slack.MsgOptionChunks(slack.NewTaskUpdateChunk("step-1", "look"))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText(strings.Repeat("x", 12001))); errCode(err) != "msg_too_long" {
		t.Errorf("12,001 characters: %v", err)
	}
	if _, _, err := api.StopStreamContext(ctx, "C1", ts); err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.AppendStreamContext(ctx, "C1", ts, slack.MsgOptionMarkdownText("late")); errCode(err) != "message_not_in_streaming_state" {
		t.Errorf("append after stop: %v", err)
	}
	got := s.Streams()
	if len(got) != 1 || got[0].Text != "Hello world" || !got[0].Stopped || len(got[0].Chunks) != 1 || got[0].ThreadTS != "1.1" {
		t.Errorf("streams %+v", got)
	}
	if _, _, err := api.StartStreamContext(ctx, "D1", slack.MsgOptionTS("1.2")); err != nil {
		t.Errorf("a DM stream needs no recipient: %v", err)
	}
	s.RefuseStreams("not_allowed")
	if _, _, err := api.StartStreamContext(ctx, "D1", slack.MsgOptionTS("1.3")); errCode(err) != "not_allowed" {
		t.Errorf("after RefuseStreams: %v", err)
	}
}
