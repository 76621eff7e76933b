package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// Channel memory (seed 003's learnings, seed 004's tiers 3 and 4): facts a team wants every
// run in a channel to keep in mind. A person stores one with "@loopbot remember ..."; the
// model may propose one with the remember tool, whose every call needs an approval. Either
// way the thread is told what was stored: nothing is remembered silently. Facts are redacted
// before they are stored, capped in number and size per channel, listed with
// "/loopbot memory" with a Forget button each, and given to the channel's runs as pinned
// context (agent/pinned.go), marked as what the team provided.

// MemoryFact is one fact kept for a channel.
type MemoryFact struct {
	ID string `json:"id"`
	// Channel is ChannelKey of the channel it is kept for.
	Channel string    `json:"channel"`
	Text    string    `json:"text"`
	By      User      `json:"by"`
	At      time.Time `json:"at"`
	// RunID is the run whose remember call proposed it; empty when a person said it.
	RunID string `json:"run_id,omitempty"`
}

// MemoryConfig bounds what a channel may keep. Zero fields take their defaults.
type MemoryConfig struct {
	// MaxFacts is how many facts one channel keeps; a new fact beyond it is refused.
	MaxFacts int `toml:"max_facts"`
	// MaxFactBytes bounds one fact.
	MaxFactBytes int `toml:"max_fact_bytes"`
}

func (c MemoryConfig) defaults() MemoryConfig {
	if c.MaxFacts == 0 {
		c.MaxFacts = 30
	}
	if c.MaxFactBytes == 0 {
		c.MaxFactBytes = 500
	}
	return c
}

// What the memory commands say.
const (
	noticeNoFact     = "Tell me what to remember, for example: @loopbot remember the staging database is db-stage-2."
	noticeNoMemory   = "Nothing is remembered for this channel yet. Add a fact with @loopbot remember ..."
	noticeForgotten  = "Forgotten."
	noticeNoForget   = "Only the person who added this fact or an approver can make loopbot forget it."
	noticeFactGone   = "That fact is no longer remembered."
	noticeRemembered = "Remembered for this channel."
)

// capError is a cap's refusal, in words for a person or a model; any other error of
// remember is the store's.
type capError struct{ msg string }

func (e *capError) Error() string { return e.msg }

func errMemoryFull(max int) error {
	return &capError{fmt.Sprintf("this channel already keeps %d facts, the most it may; forget one first (/loopbot memory lists them)", max)}
}

func errFactTooLong(n, max int) error {
	return &capError{fmt.Sprintf("that fact is %d bytes; a fact may be at most %d", n, max)}
}

// remember stores text as a fact for the channel of thread, redacted, within the caps, and
// posts what was stored to thread in the same transaction. It returns the fact stored.
func remember(tx Tx, cfg MemoryConfig, redactor *Redactor, thread ThreadRef, by User, runID, text string, now time.Time, newID func() string) (*MemoryFact, error) {
	cfg = cfg.defaults()
	text = strings.TrimSpace(redactor.Redact(text))
	if n := len(text); n > cfg.MaxFactBytes {
		return nil, errFactTooLong(n, cfg.MaxFactBytes)
	}
	channel := ChannelKey(thread)
	facts, err := tx.Memory(channel)
	if err != nil {
		return nil, err
	}
	if len(facts) >= cfg.MaxFacts {
		return nil, errMemoryFull(cfg.MaxFacts)
	}
	f := &MemoryFact{ID: newID(), Channel: channel, Text: text, By: by, At: now, RunID: runID}
	if err := tx.PutMemory(f); err != nil {
		return nil, err
	}
	how := displayName(by) + " asked me to remember"
	if runID != "" {
		how = "This run remembers, as " + displayName(by) + " approved"
	}
	note := fmt.Sprintf("%s, for every run in this channel: %q. /loopbot memory lists what is kept.", how, text)
	return f, tx.PutOutbox(OutboxItem{Key: "notice/" + newID(), Kind: OutboxNotice, Thread: thread, Text: note, CreatedAt: now})
}

// pinnedFacts is what runs in thread's channel are given of its memory, oldest first.
func pinnedFacts(tx Tx, thread ThreadRef) ([]string, error) {
	facts, err := tx.Memory(ChannelKey(thread))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(facts))
	for _, f := range facts {
		out = append(out, f.Text+" (from "+displayName(f.By)+")")
	}
	return out, nil
}

// rememberCommand handles "@loopbot remember FACT".
func (b *Bot) rememberCommand(ctx context.Context, ev Event, text string) (Result, error) {
	if !b.cfg.Policy.mayStart(ev) {
		return Result{Notice: noticeNotAllowed}, nil
	}
	if text == "" {
		return Result{Notice: noticeNoFact}, nil
	}
	var notice string
	err := b.store.Update(ctx, func(tx Tx) error {
		notice = noticeRemembered
		_, err := remember(tx, b.cfg.Memory, b.redactor, ev.Thread, ev.User, "", text, b.clock.stamp(), b.newID)
		if err != nil && !isStoreError(err) {
			notice = "Not remembered: " + err.Error() + "."
			return nil
		}
		return err
	})
	return Result{Notice: notice}, err
}

// isStoreError tells a failure of the store from a cap's refusal.
func isStoreError(err error) bool {
	var capped *capError
	return !errors.As(err, &capped)
}

// memoryPage is how many facts one memory message lists.
const memoryPage = 20

// memoryItem is the outbox item that posts the channel's memory with its Forget buttons.
func memoryItem(id string) OutboxItem {
	return OutboxItem{Key: "memory/" + id, Kind: OutboxMemory}
}

// memoryCommand posts the channel's facts to the thread, each with a Forget button.
func (b *Bot) memoryCommand(ctx context.Context, ev Event) (Result, error) {
	if !b.cfg.Policy.mayStart(ev) {
		return Result{Notice: noticeNotAllowed}, nil
	}
	var res Result
	err := b.store.Update(ctx, func(tx Tx) error {
		res = Result{}
		facts, err := tx.Memory(ChannelKey(ev.Thread))
		if err != nil {
			return err
		}
		if len(facts) == 0 {
			res.Notice = noticeNoMemory
			return nil
		}
		// A message holds at most memoryPage facts: Slack and Discord take 25 buttons.
		var items []OutboxItem
		for page := range slices.Chunk(facts, memoryPage) {
			it := memoryItem(b.newID())
			for range page {
				it.Actions = append(it.Actions, b.newID())
			}
			for i, f := range page {
				act := &Action{ID: it.Actions[i], Kind: ActionForget, Channel: f.Channel, Fact: f.ID, Listing: it.Key, Siblings: it.Actions}
				if err := tx.PutAction(act); err != nil {
					return err
				}
			}
			items = append(items, it)
		}
		return b.recs.put(tx, ev.Thread, b.clock.stamp(), items...)
	})
	return res, err
}

// memoryMessage renders the facts the item's buttons stand for that are still kept.
func memoryMessage(tx Tx, it OutboxItem) (Message, error) {
	m := Message{Kind: KindNotice, Title: "Remembered for this channel",
		Footer: "Runs in this channel are given these facts. Forget removes one."}
	var lines []string
	for _, id := range it.Actions {
		act, err := tx.Action(id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Message{}, err
		}
		f, err := tx.MemoryFact(act.Channel, act.Fact)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return Message{}, err
		}
		// The facts are the text, not fields: every platform shows a notice's text, and a
		// Discord notice has no fields.
		n := len(m.Buttons) + 1
		lines = append(lines, fmt.Sprintf("%d. %s (%s, %s)", n, f.Text, displayName(f.By), f.At.UTC().Format("2006-01-02")))
		m.Buttons = append(m.Buttons, Button{ID: act.ID, Label: fmt.Sprintf("Forget %d", n), Style: StyleDanger})
	}
	m.Text = strings.Join(lines, "\n")
	if len(lines) == 0 {
		m.Text = "Nothing is remembered for this channel any more."
		m.Footer = ""
	}
	return m, nil
}

// forget handles a Forget click: the fact's author or an approver may forget it.
func (b *Bot) forget(ctx context.Context, who User, from ThreadRef, act *Action) (Result, error) {
	var res Result
	err := b.store.Update(ctx, func(tx Tx) error {
		res = Result{}
		if ChannelKey(from) != act.Channel {
			res.Notice = noticeOtherThread
			return nil
		}
		f, err := tx.MemoryFact(act.Channel, act.Fact)
		if errors.Is(err, ErrNotFound) {
			res.Notice = noticeFactGone
			return nil
		}
		if err != nil {
			return err
		}
		if who.ID != f.By.ID && !slices.Contains(b.cfg.Policy.Approvers, who.ID) {
			res.Notice = noticeNoForget
			return nil
		}
		if err := tx.DeleteMemory(f.Channel, f.ID); err != nil {
			return err
		}
		if err := tx.AppendAudit(AuditEntry{At: b.clock.stamp(), Actor: who, Action: "forget", Detail: f.Text}); err != nil {
			return err
		}
		res.Notice = noticeForgotten
		text := fmt.Sprintf("%s made loopbot forget: %q.", displayName(who), f.Text)
		items := []OutboxItem{noticeItem("", b.newID(), text)}
		if act.Listing != "" {
			// The list it was on is edited, so it no longer shows the fact.
			items = append(items, OutboxItem{Key: act.Listing, Kind: OutboxMemory, Actions: act.Siblings})
		}
		return b.recs.put(tx, from, b.clock.stamp(), items...)
	})
	return res, err
}

// rememberTool is the remember tool: the model proposes a fact for the channel of its run,
// and a person approves it (its risk is confirm, whatever it says) before it is stored.
type rememberTool struct {
	store    Store
	cfg      MemoryConfig
	redactor *Redactor
	now      func() time.Time
	newID    func() string
}

// RememberName is the name of the remember tool.
const RememberName = "remember"

// NewRememberTool returns the remember tool over store, for the agent's tools. cfg is the
// bot's configuration, whose memory caps and redaction it applies.
func NewRememberTool(store Store, cfg Config) agent.Tool {
	cfg = cfg.Defaults()
	return &rememberTool{store: store, cfg: cfg.Memory, redactor: NewRedactor(cfg.Redact), now: time.Now, newID: NewID}
}

func (t *rememberTool) Info() agent.ToolInfo {
	return agent.ToolInfo{Spec: agent.ToolSpec{
		Name: RememberName,
		Description: "Propose a short fact for loopbot to remember for every later run in this channel " +
			"(a convention, a name, where something lives). A person must approve it first. " +
			"Use it only for facts the team would want kept, never for secrets.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"fact":{"type":"string","description":"the fact, one or two sentences"}},"required":["fact"],"additionalProperties":false}`),
	}}
}

// Assess asks for an approval of every call: a fact is given to every later run of the
// channel, so no model decides alone what the team's memory holds.
func (t *rememberTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: agent.RiskConfirm, Reason: "remembers a fact for every later run in this channel"}
}

func (t *rememberTool) Call(ctx context.Context, inv agent.Invocation) (string, error) {
	var args struct {
		Fact string `json:"fact"`
	}
	if err := json.Unmarshal(inv.Args, &args); err != nil {
		return "", fmt.Errorf("read the arguments: %w", err)
	}
	if strings.TrimSpace(args.Fact) == "" {
		return "", errors.New("the fact is empty")
	}
	var stored *MemoryFact
	var refused error
	err := t.store.Update(ctx, func(tx Tx) error {
		stored, refused = nil, nil
		rec, err := tx.RunHeader(inv.RunID)
		if err != nil {
			return fmt.Errorf("load run %s: %w", inv.RunID, err)
		}
		by, err := approvedBy(tx, inv)
		if err != nil {
			return err
		}
		f, err := remember(tx, t.cfg, t.redactor, rec.Thread, by, inv.RunID, args.Fact, t.now().UTC(), t.newID)
		if err != nil && !isStoreError(err) {
			refused = err
			return nil
		}
		stored = f
		return err
	})
	switch {
	case err != nil:
		return "", fmt.Errorf("store the fact: %w", err)
	case refused != nil:
		return "", refused
	}
	return "Remembered for this channel: " + stored.Text, nil
}

// approvedBy is who approved the remember call inv: the fact is theirs, so they (or an
// approver) may forget it. The loop runs the tool only after an approval.
func approvedBy(tx Tx, inv agent.Invocation) (User, error) {
	aps, err := tx.Approvals(inv.RunID)
	if err != nil {
		return User{}, err
	}
	for _, ap := range aps {
		if ap.CallID == inv.CallID && ap.Status == ApprovalApproved {
			return ap.DecidedBy, nil
		}
	}
	return User{}, errors.New("the call has no approval")
}

// memoryCard is the memory list an item edits, once its first post is known: it is kept on
// the list's first button.
func memoryCard(tx Tx, it OutboxItem) (MessageRef, error) {
	if len(it.Actions) == 0 {
		return MessageRef{}, nil
	}
	act, err := tx.Action(it.Actions[0])
	if errors.Is(err, ErrNotFound) {
		return MessageRef{}, nil
	}
	if err != nil {
		return MessageRef{}, err
	}
	return act.Card, nil
}

// saveMemoryCard keeps the reference of a posted memory list on its first button.
func saveMemoryCard(tx Tx, it OutboxItem, ref MessageRef) error {
	if len(it.Actions) == 0 {
		return nil
	}
	act, err := tx.Action(it.Actions[0])
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	act.Card = ref
	return tx.PutAction(act)
}
