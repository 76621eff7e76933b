package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Autonomy levels are the knobs of seed 004 set per channel: how much the loop may do before
// it asks. A level only decides about calls that are safe or cautious on their own; a confirm
// or dangerous call asks at every level, and the data-flow guard (which raises a call to
// confirm, or refuses it when it carries a secret) has done its work before a level is
// consulted, so no level can relax it. Momentum (momentum.go) only ever adds asks: it never
// lifts a run above its channel's level.

// Level names an autonomy level.
type Level string

// The autonomy levels, from the most asking to the least.
const (
	LevelCareful  Level = "careful"
	LevelBalanced Level = "balanced"
	LevelBold     Level = "bold"
)

// Levels lists the levels in order, for help texts and validation.
var Levels = []Level{LevelCareful, LevelBalanced, LevelBold}

// ParseLevel reads a level by name.
func ParseLevel(s string) (Level, error) {
	l := Level(strings.ToLower(strings.TrimSpace(s)))
	for _, k := range Levels {
		if l == k {
			return l, nil
		}
	}
	return "", fmt.Errorf("unknown autonomy level %q (want careful, balanced or bold)", s)
}

// LevelConfig is what one autonomy level lets the loop do without asking.
type LevelConfig struct {
	// AutoReads: safe calls, and cautious calls of read-only tools, run unasked (reads from
	// outside the run are OutsideReads's).
	AutoReads bool
	// OutsideReads: safe calls that bring outside content into the run (a web page, an
	// untrusted MCP server's result) run unasked.
	OutsideReads bool
	// AutoWrites: cautious calls of tools that change the workspace (write_file) run unasked.
	AutoWrites bool
	// ConfirmShell: cautious calls of tools that run programs (shell) ask.
	ConfirmShell bool
	// PauseEveryN pauses the run for a check-in every so many steps; zero never does.
	PauseEveryN int
	// SlowDown is the momentum below which cautious calls ask, whatever the other knobs say.
	SlowDown float64
	// PauseBelow is the momentum below which the run pauses for a check-in.
	PauseBelow float64
}

// levelConfigs are the levels' knobs. They are fixed, so that "careful" means the same in
// every deployment; the README's table shows them. Balanced's momentum thresholds are seed
// 004's: slow down when more went wrong than right (below 0.5), pause below 0.3.
var levelConfigs = map[Level]LevelConfig{
	LevelCareful: {AutoReads: true, OutsideReads: false, AutoWrites: false, ConfirmShell: true,
		PauseEveryN: 10, SlowDown: 0.75, PauseBelow: 0.5},
	LevelBalanced: {AutoReads: true, OutsideReads: true, AutoWrites: true, ConfirmShell: false,
		PauseEveryN: 0, SlowDown: 0.5, PauseBelow: 0.3},
	LevelBold: {AutoReads: true, OutsideReads: true, AutoWrites: true, ConfirmShell: false,
		PauseEveryN: 0, SlowDown: 0.3, PauseBelow: 0.15},
}

// Config returns the level's knobs; an unknown level gets careful's.
func (l Level) Config() LevelConfig {
	if c, ok := levelConfigs[l]; ok {
		return c
	}
	return levelConfigs[LevelCareful]
}

// callKind is what a call does, as far as the levels care.
type callKind int

const (
	kindRead    callKind = iota // a read-only tool
	kindWrite                   // a tool that changes something and is not a program runner
	kindExecute                 // a tool that runs programs (ToolInfo.Executes)
)

func kindOf(info ToolInfo) callKind {
	switch {
	case info.Executes:
		return kindExecute
	case info.ReadOnly:
		return kindRead
	}
	return kindWrite
}

// needsPerson decides whether a call (already assessed, floors and the data-flow guard
// applied) needs a person at level lv with the run's momentum, and says why when it does.
// Confirm and dangerous calls always do; a level and momentum decide only about safe and
// cautious ones, and momentum only ever adds to what the level asks.
func needsPerson(lv Level, kind callKind, as Assessment, momentum float64, confirmCautious bool) (bool, string) {
	c := lv.Config()
	switch {
	case as.Risk >= RiskConfirm || as.Risk < RiskSafe:
		return true, ""
	case as.Risk == RiskSafe:
		switch {
		case as.Reads != "" && !c.OutsideReads:
			return true, fmt.Sprintf("reads from outside the run, which this channel's autonomy (%s) asks about", lv)
		case !c.AutoReads:
			return true, fmt.Sprintf("this channel's autonomy (%s) asks about every call", lv)
		}
		return false, ""
	}
	// Cautious.
	switch {
	case confirmCautious:
		return true, "the configuration asks about every cautious call"
	case kind == kindExecute && c.ConfirmShell:
		return true, fmt.Sprintf("runs a command, which this channel's autonomy (%s) asks about", lv)
	case kind == kindWrite && !c.AutoWrites:
		return true, fmt.Sprintf("changes the workspace, which this channel's autonomy (%s) asks about", lv)
	case kind == kindRead && !c.AutoReads:
		return true, fmt.Sprintf("this channel's autonomy (%s) asks about every call", lv)
	case momentum < c.SlowDown:
		return true, fmt.Sprintf("momentum is low (%.2f, below %.2f at %s): recent calls failed or were rejected", momentum, c.SlowDown, lv)
	}
	return false, ""
}

// validLevel reports whether l is a level exactly as the constants spell it.
func validLevel(l Level) bool { return slices.Contains(Levels, l) }

// defaultLevel is the configured level for channels nobody has set one for.
func (c Config) defaultLevel() Level {
	if l, err := ParseLevel(string(c.Autonomy)); err == nil {
		return l
	}
	return LevelBalanced
}

// level is the autonomy level the run works at: the one its state records (the channel's,
// set by the bot), or the configured default.
func (r *runner) level() Level {
	if l, err := ParseLevel(string(r.st.Autonomy)); err == nil {
		return r.ceiling(l)
	}
	return r.ceiling(r.a.cfg.defaultLevel())
}

// EffectiveLevel is the level the run works at as its state records it: its channel's
// (Autonomy), made more careful by its playbook's (PlaybookLevel) where that asks more; ""
// when the state records no level (the configured default applies).
func (st *State) EffectiveLevel() Level {
	if !validLevel(st.Autonomy) {
		return ""
	}
	return capLevel(st.Autonomy, st.PlaybookLevel)
}

// approval decides, for a call the loop has assessed, whether it waits for a person; it
// returns the status the call starts in and its reason for the card.
func (r *runner) approval(reg *registered, as Assessment) (CallStatus, string) {
	ask, why := needsPerson(r.level(), kindOf(reg.info), as, r.st.Momentum.Score(), r.a.cfg.ConfirmCautious)
	if !ask && as.Risk == RiskCautious && r.a.cfg.LowMomentum > 0 && r.st.ConsecutiveFailures >= r.a.cfg.LowMomentum {
		ask, why = true, "recent calls failed"
	}
	if !ask {
		return CallReady, as.Reason
	}
	if why == "" {
		return CallAwaitingApproval, as.Reason
	}
	return CallAwaitingApproval, strings.TrimSpace(as.Reason + " (asked because " + why + ")")
}

// refreshLevel takes the channel's level as it is now, through Hooks.Autonomy: an approver
// who changes it changes what a working run asks from its next step on.
func (r *runner) refreshLevel(ctx context.Context) {
	if r.h.Autonomy == nil {
		return
	}
	l, err := r.h.Autonomy(ctx)
	if err != nil {
		// The level in the state stays; the next boundary asks again.
		r.a.log.Warn("read the channel's autonomy level", "run", r.st.RunID, "err", err)
		return
	}
	if l == "" {
		return
	}
	if validLevel(l) {
		r.st.Autonomy = l
	}
}
