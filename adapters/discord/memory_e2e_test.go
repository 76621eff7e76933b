package discord

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/adapters/discord/discordfake"
	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

// Channel memory through the gateway: "@loopbot remember ..." is acknowledged in its thread,
// "@loopbot memory" posts the facts with a Forget button each, and pressing Forget (the
// button's ID round-tripped through Discord's custom_id) forgets the fact.
func TestE2EChannelMemory(t *testing.T) {
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond)})
	e.start(t)
	mention := "<@" + discordfake.BotID + "> "
	e.f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1300", discordfake.Channel, mention+"remember the staging database is db-stage-2", discordfake.BotID))
	waitUntil(t, "the acknowledgement", func() bool { _, ok := e.answer("1300", "asked me to remember"); return ok })

	e.f.Dispatch(t, "MESSAGE_CREATE", discordfake.MessagePayload("1301", discordfake.Channel, mention+"memory", discordfake.BotID))
	var list discordfake.Message
	waitUntil(t, "the memory list", func() bool {
		var ok bool
		list, ok = e.answer("1301", "Remembered for this channel")
		return ok
	})
	if c, _ := list.Payload["content"].(string); !strings.Contains(c, "1. the staging database is db-stage-2") {
		t.Fatalf("memory list %q does not show the fact", c)
	}
	forget := buttonIDs(list)["Forget 1"]
	if forget == "" {
		t.Fatalf("memory list without a Forget button: %+v", list.Payload)
	}
	e.click(t, "1301", list.ID, forget, discordfake.UserID)
	waitUntil(t, "the fact forgotten", func() bool {
		var n int
		err := e.db.View(context.Background(), func(tx bot.Tx) error {
			facts, err := tx.Memory("discord/" + discordfake.GuildID + "/" + discordfake.Channel)
			n = len(facts)
			return err
		})
		return err == nil && n == 0
	})
	waitUntil(t, "the thread told", func() bool { _, ok := e.answer("1301", "made loopbot forget"); return ok })
}

// /loopbot goal:playbooks answers the caller alone with the real bot's list: an ephemeral
// deferral edited with the list, and no thread opened for it.
func TestE2EPlaybooksList(t *testing.T) {
	dir := t.TempDir()
	pb := "---\nname: deploy-check\ndescription: Check the last deploy\ntools: [deploy]\n---\nCheck it.\n"
	if err := os.WriteFile(filepath.Join(dir, "deploy-check.md"), []byte(pb), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newE2E(t, bot.Config{EditInterval: agent.Duration(10 * time.Millisecond), Playbooks: bot.PlaybookConfig{Dir: dir}})
	e.start(t)
	id, token := e.f.Interaction()
	e.f.Dispatch(t, "INTERACTION_CREATE", discordfake.SlashPayload(id, token, discordfake.Channel, "", "loopbot", discordfake.GoalOption("playbooks")))
	reqs := e.f.WaitFor(t, "the list", func(r []discordfake.Request) bool {
		return len(discordfake.Find(r, "PATCH", "/api/v9/webhooks/"+discordfake.AppID+"/"+token+"/messages/@original")) == 1
	})
	cb := discordfake.Find(reqs, "POST", "/api/v9/interactions/*/*/callback")[0]
	if data, _ := cb.Body["data"].(map[string]any); data["flags"] != float64(64) {
		t.Errorf("deferral %+v, want ephemeral", cb.Body)
	}
	edit := discordfake.Find(reqs, "PATCH", "/api/v9/webhooks/*/*/messages/@original")[0]
	if c := fmt.Sprint(edit.Body["content"]); !strings.Contains(c, "deploy-check: Check the last deploy") {
		t.Errorf("list %q", c)
	}
	if len(discordfake.Find(reqs, "POST", "/api/v9/channels/*/messages/*/threads")) != 0 {
		t.Error("the list opened a thread")
	}
}
