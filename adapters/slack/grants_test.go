package slack

import (
	"encoding/json"
	"testing"

	"github.com/loopbot/loopbot/bot"
)

// TestGrantsCommand: "/loopbot grants" and "@loopbot grants" ask for the channel's grants;
// the slash command gets a root message to post them under.
func TestGrantsCommand(t *testing.T) {
	c, err := decodeCommand(slashCommand{TeamID: teamID, ChannelID: "C1", UserID: "U1", UserName: "ann", Command: "/loopbot",
		Text: "grants", TriggerID: "trig-g"}, "/loopbot")
	if err != nil || c.ev.Command != bot.CommandGrants || c.goal == "" || c.reply != "" || c.ev.Thread.Channel != "C1" {
		t.Fatalf("/loopbot grants: %+v, %v", c, err)
	}
	body, _ := json.Marshal(mentionCallback("Ev9", "C1", "1700000000.000100", "1700000005.000100", "<@"+botUserID+"> grants"))
	ev, ok, err := decodeEvent(body, identity{UserID: botUserID, TeamID: teamID})
	if err != nil || !ok || ev.Kind != bot.EventCommand || ev.Command != bot.CommandGrants || ev.Thread.Thread != "1700000005.000100" {
		t.Fatalf("@loopbot grants: %+v, %v, %v", ev, ok, err)
	}
}
