package bot_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
	"github.com/loopbot/loopbot/bot"
)

func TestConfigDefaults(t *testing.T) {
	c := bot.Config{}.Defaults()
	if c.MaxConcurrentRuns != 8 || time.Duration(c.EditInterval) != time.Second || time.Duration(c.DedupeTTL) != 2*time.Hour || time.Duration(c.LeaseTTL) != 30*time.Second {
		t.Errorf("defaults = %+v", c)
	}
	p := c.Policy
	if p.ApproveBy != bot.ApproveByRequester || p.DangerousNeedsOther == nil || !*p.DangerousNeedsOther || time.Duration(p.ApprovalExpiry) != 30*time.Minute {
		t.Errorf("policy defaults = %+v", p)
	}
	no := false
	if c := (bot.Config{Policy: bot.Policy{DangerousNeedsOther: &no}}).Defaults(); *c.Policy.DangerousNeedsOther {
		t.Error("Defaults overrode dangerous_needs_other = false")
	}
}

func TestConfigCheck(t *testing.T) {
	tests := []struct {
		name string
		cfg  bot.Config
		want string // substring of the error; empty for none
	}{
		{"zero", bot.Config{}, ""},
		{"approvers with a list", bot.Config{Policy: bot.Policy{ApproveBy: "approvers", Approvers: []string{"U1"}}}, ""},
		{"unknown approve_by", bot.Config{Policy: bot.Policy{ApproveBy: "anyone"}}, "approve_by"},
		{"approvers without a list", bot.Config{Policy: bot.Policy{ApproveBy: "approvers"}}, "at least one approver"},
		{"short dedupe", bot.Config{DedupeTTL: agent.Duration(10 * time.Minute)}, "dedupe_ttl"},
		{"short lease", bot.Config{LeaseTTL: agent.Duration(time.Second)}, "lease_ttl"},
		{"negative lease", bot.Config{LeaseTTL: agent.Duration(-time.Minute)}, "lease_ttl"},
		{"shortest lease", bot.Config{LeaseTTL: agent.Duration(3 * time.Second)}, ""},
		{"negative runs", bot.Config{MaxConcurrentRuns: -1}, "max_concurrent_runs"},
		{"negative interval", bot.Config{EditInterval: agent.Duration(-time.Second)}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Check()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Check() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestDurationText(t *testing.T) {
	var d agent.Duration
	if err := d.UnmarshalText([]byte("90s")); err != nil || time.Duration(d) != 90*time.Second {
		t.Errorf("UnmarshalText(90s) = %v, %v", time.Duration(d), err)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil {
		t.Error("UnmarshalText(soon) succeeded")
	}
	if b, _ := d.MarshalText(); string(b) != "1m30s" {
		t.Errorf("MarshalText = %s", b)
	}
}

// FuzzEventValidate feeds Validate events decoded from arbitrary JSON, as an adapter's
// decoding may produce: it must never panic, and what it accepts must have what the bot
// relies on.
func FuzzEventValidate(f *testing.F) {
	f.Add(`{"kind":"mention","id":"E1","thread":{"platform":"slack","channel":"C1","thread":"1.2"},"user":{"id":"U1"},"text":"hi"}`)
	f.Add(`{"kind":"command","id":"E2","thread":{"platform":"discord","channel":"C","thread":"T"},"user":{"id":"U"},"command":"rm"}`)
	f.Add(`{"kind":"action","id":"E3","thread":{"platform":"web","channel":"c","thread":"t"},"user":{"id":"u"},"action_id":""}`)
	f.Add(`{"kind":"command","id":"E4","thread":{"platform":"web","channel":"c","thread":"t"},"user":{"id":"u"},"command":"autonomy","text":"bold"}`)
	f.Fuzz(func(t *testing.T, data string) {
		var ev bot.Event
		if json.Unmarshal([]byte(data), &ev) != nil {
			return
		}
		if ev.Validate() != nil {
			return
		}
		switch {
		case ev.ID == "" || ev.User.ID == "" || !ev.Thread.Valid():
			t.Fatalf("accepted an event without id, user or thread: %+v", ev)
		case ev.Kind == bot.EventAction && ev.ActionID == "":
			t.Fatalf("accepted an action without an action id: %+v", ev)
		case ev.Kind == bot.EventCommand && ev.Command != bot.CommandStart && ev.Command != bot.CommandStatus && ev.Command != bot.CommandCancel && ev.Command != bot.CommandAutonomy:
			t.Fatalf("accepted an unknown command: %+v", ev)
		case ev.Kind != bot.EventMention && ev.Kind != bot.EventReply && ev.Kind != bot.EventCommand && ev.Kind != bot.EventAction:
			t.Fatalf("accepted an unknown kind: %+v", ev)
		}
	})
}
