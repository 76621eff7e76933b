package bot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// A channel's autonomy level (agent/autonomy.go) is set by approvers with
// "/loopbot autonomy careful|balanced|bold" and kept in the store; a channel nobody set one
// for works at the configured default ([agent] autonomy). A run takes its channel's level when
// it is created, and the loop asks for the channel's level again at every step boundary
// (Hooks.Autonomy), so a change reaches the runs that are working too. A change is written to
// the audit log, and the status cards of the channel's runs show it.

// CommandAutonomy shows or sets the autonomy level of the event's channel; Event.Text holds
// the level to set, or nothing to show it.
const CommandAutonomy = "autonomy"

// ChannelAutonomy is the autonomy level approvers set for one channel.
type ChannelAutonomy struct {
	Platform  string      `json:"platform"`
	Workspace string      `json:"workspace,omitempty"`
	Channel   string      `json:"channel"`
	Level     agent.Level `json:"level"`
	SetBy     User        `json:"set_by"`
	SetAt     time.Time   `json:"set_at"`
}

// Key is the channel's storage key; every thread of the channel has the same.
func (c *ChannelAutonomy) Key() string {
	return ChannelKey(ThreadRef{Platform: c.Platform, Workspace: c.Workspace, Channel: c.Channel})
}

// ChannelKey is the storage key of the channel a thread is in.
func ChannelKey(t ThreadRef) string { return t.Platform + "/" + t.Workspace + "/" + t.Channel }

// Notices of the autonomy command.
const (
	noticeAutonomyNoApprovers = "Only loopbot's approvers can change this channel's autonomy level, and none are configured " +
		"([bot.policy] approvers in loopbot's configuration)."
	noticeAutonomyNotApprover = "Only loopbot's approvers can change this channel's autonomy level."
)

// channelLevel is the level of thread's channel: the one approvers set, or def.
func channelLevel(tx Tx, thread ThreadRef, def agent.Level) (agent.Level, error) {
	ca, err := tx.ChannelAutonomy(thread)
	switch {
	case errors.Is(err, ErrNotFound):
		return def, nil
	case err != nil:
		return "", err
	}
	return ca.Level, nil
}

// autonomyHelp says what the levels do, for the command without a level.
func autonomyHelp(level agent.Level, set *ChannelAutonomy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This channel's autonomy level is %s", level)
	if set != nil {
		fmt.Fprintf(&b, " (set by %s on %s)", displayName(set.SetBy), set.SetAt.UTC().Format("2006-01-02 15:04 UTC"))
	} else {
		b.WriteString(" (the configured default)")
	}
	b.WriteString(".\n• careful: asks before writes, shell commands and reading web pages; checks in every 10 steps.\n" +
		"• balanced: reads, workspace writes and read-only commands run; asks when recent calls keep failing.\n" +
		"• bold: as balanced, and slows down only when most recent calls failed.\n" +
		"At every level, risky commands, outside requests after reading a web page, and anything carrying a secret still ask or are refused.\n" +
		"Approvers change it with: /loopbot autonomy careful|balanced|bold")
	return b.String()
}

// autonomy handles the autonomy command: without a level it says the channel's; with one, an
// approver sets it, the audit log records it, and the channel's runs that wait take it at
// once (a working run takes it at its next step).
func (b *Bot) autonomy(ctx context.Context, ev Event) (Result, error) {
	def := b.recs.level
	arg := strings.TrimSpace(ev.Text)
	if arg == "" {
		var level agent.Level
		var set *ChannelAutonomy
		err := b.store.View(ctx, func(tx Tx) error {
			ca, err := tx.ChannelAutonomy(ev.Thread)
			switch {
			case errors.Is(err, ErrNotFound):
				level, set = def, nil
				return nil
			case err != nil:
				return err
			}
			level, set = ca.Level, ca
			return nil
		})
		if err != nil {
			return Result{}, err
		}
		return Result{Notice: autonomyHelp(level, set)}, nil
	}
	level, err := agent.ParseLevel(arg)
	if err != nil {
		return Result{Notice: fmt.Sprintf("%q is not an autonomy level. Choose careful, balanced or bold.", arg)}, nil
	}
	if !slices.Contains(b.cfg.Policy.Approvers, ev.User.ID) {
		if len(b.cfg.Policy.Approvers) == 0 {
			return Result{Notice: noticeAutonomyNoApprovers}, nil
		}
		return Result{Notice: noticeAutonomyNotApprover}, nil
	}
	var res Result
	err = b.store.Update(ctx, func(tx Tx) error {
		res = Result{}
		prev, err := channelLevel(tx, ev.Thread, def)
		if err != nil {
			return err
		}
		now := b.clock.stamp()
		ca := &ChannelAutonomy{Platform: ev.Thread.Platform, Workspace: ev.Thread.Workspace, Channel: ev.Thread.Channel,
			Level: level, SetBy: ev.User, SetAt: now}
		if err := tx.PutChannelAutonomy(ca); err != nil {
			return err
		}
		if err := tx.AppendAudit(AuditEntry{At: now, Actor: ev.User, Action: "autonomy",
			Detail: fmt.Sprintf("channel %s: %s -> %s", ca.Key(), prev, level)}); err != nil {
			return err
		}
		if err := b.recs.relevel(tx, ev.Thread, level, now); err != nil {
			return err
		}
		res.Notice = fmt.Sprintf("This channel's autonomy level is now %s (it was %s).", level, prev)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	b.log.Info("autonomy level set", "channel", ChannelKey(ev.Thread), "level", level, "by", ev.User.ID)
	return res, nil
}

// relevel gives the channel's runs that no goroutine works on (queued or waiting for a
// person) the new level, and edits their status cards. A working run takes the level from
// Hooks.Autonomy at its next step; writing its state here would race its next checkpoint.
func (r *records) relevel(tx Tx, thread ThreadRef, level agent.Level, now time.Time) error {
	runs, err := tx.Runs(RunFilter{Statuses: []agent.Status{agent.StatusQueued, agent.StatusAwaitingApproval, agent.StatusAwaitingInput}})
	if err != nil {
		return err
	}
	key := ChannelKey(thread)
	for _, rec := range runs {
		if ChannelKey(rec.Thread) != key || rec.State == nil || rec.State.Autonomy == level {
			continue
		}
		rec.State.Autonomy = level
		rec.UpdatedAt = now
		if err := tx.PutRun(rec); err != nil {
			return err
		}
		if err := r.put(tx, rec.Thread, now, cardItem(rec.ID)); err != nil {
			return err
		}
	}
	return nil
}

// autonomyFooter is the status card's part about the run's level and momentum.
// The level shown is the one the run works at: a playbook's more careful level is named so.
func autonomyFooter(st *agent.State) string {
	lv := st.EffectiveLevel()
	if lv == "" {
		return ""
	}
	name := string(lv)
	if lv != st.Autonomy {
		name += " (playbook)"
	}
	return fmt.Sprintf(" · %s · momentum %.2f", name, st.Momentum.Score())
}
