package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Grants let a person trust a kind of call once instead of approving every call of it. A
// grant for the run ("Approve for this run") covers later calls of the same tool at the same
// or lower risk until the run ends; it is kept in the State. A grant for the channel ("Always
// allow here") covers calls of the tool whose arguments match the pattern the approval card
// showed, at the same or lower risk; the bot stores those and hands them to the run through
// Hooks.Grants. No grant covers a dangerous call, a call the data-flow guard holds, or a call
// carrying a secret (refused before any grant is looked at): those always ask, or never run.

// GrantScope says how far a grant reaches.
type GrantScope string

// Grant scopes.
const (
	GrantRun     GrantScope = "run"
	GrantChannel GrantScope = "channel"
)

// Grant lets calls of one tool run without asking.
type Grant struct {
	ID    string     `json:"id"`
	Scope GrantScope `json:"scope"`
	Tool  string     `json:"tool"`
	// Pattern is the tool's argument pattern (Grantable) a channel grant is limited to; a
	// run grant has none and covers the tool's calls whatever their arguments.
	Pattern string `json:"pattern,omitempty"`
	// MaxRisk is the highest risk the grant covers; never RiskDangerous.
	MaxRisk Risk      `json:"max_risk"`
	By      string    `json:"by"`
	At      time.Time `json:"at,omitzero"`
}

// Describe says what the grant covers, for a card and the audit log.
func (g Grant) Describe() string {
	s := g.Tool
	if g.Pattern != "" {
		s += " matching " + g.Pattern
	}
	return s + " at risk " + g.MaxRisk.String() + " or lower"
}

// Grantable is a tool whose calls a channel grant can cover by an argument pattern. A tool
// that is not Grantable can be granted for a run, never for a channel.
type Grantable interface {
	// GrantPattern is the pattern an "always allow" grant made from a call with args stores
	// and the card shows; ok is false when no pattern narrow enough can be drawn from args.
	GrantPattern(args json.RawMessage) (pattern string, ok bool)
	// GrantCovers reports whether a grant with pattern covers a call with args. It must not
	// cover more than the pattern says in words: an allowlist, never a deny-list.
	GrantCovers(pattern string, args json.RawMessage) bool
}

// grantable reports whether a call at risk may be granted at all.
func grantable(r Risk) bool { return r >= RiskSafe && r < RiskDangerous }

// GrantRun records a person's "Approve for this run" of call c: later calls of the same tool
// at c's risk or lower run without asking until the run ends. A dangerous call is never
// granted.
func (st *State) GrantRun(c *CallRecord, id, by string, now time.Time) (Grant, error) {
	if c == nil || !grantable(c.Risk) {
		return Grant{}, fmt.Errorf("grant for run %s: only calls below dangerous can be granted", st.RunID)
	}
	g := Grant{ID: id, Scope: GrantRun, Tool: c.Name, MaxRisk: c.Risk, By: by, At: now.UTC()}
	st.Grants = append(st.Grants, g)
	return g, nil
}

// grantFor returns the grant that covers a call of tool with args at risk, if any: the
// run's own first, then the channel's, which are read only when the run's cover nothing.
func (r *runner) grantFor(tool string, args json.RawMessage, risk Risk, channel func() []Grant) *Grant {
	if !grantable(risk) {
		return nil
	}
	find := func(gs []Grant) *Grant {
		for i := range gs {
			if g := &gs[i]; r.a.covers(g, tool, args, risk) {
				return g
			}
		}
		return nil
	}
	if g := find(r.st.Grants); g != nil {
		return g
	}
	return find(channel())
}

// covers reports whether g covers a call of tool with args at risk.
func (a *Agent) covers(g *Grant, tool string, args json.RawMessage, risk Risk) bool {
	if g.Tool != tool || risk > g.MaxRisk {
		return false
	}
	switch g.Scope {
	case GrantRun:
		return true
	case GrantChannel:
		reg := a.tools[tool]
		if reg == nil || g.Pattern == "" {
			return false
		}
		gt, ok := reg.tool.(Grantable)
		return ok && gt.GrantCovers(g.Pattern, args)
	}
	return false
}

// grantPattern is the pattern a channel grant made from this call would store, or "" when
// the call cannot be granted for a channel.
func (a *Agent) grantPattern(tool string, args json.RawMessage, risk Risk) string {
	reg := a.tools[tool]
	if reg == nil || !grantable(risk) {
		return ""
	}
	gt, ok := reg.tool.(Grantable)
	if !ok {
		return ""
	}
	p, ok := gt.GrantPattern(args)
	if !ok {
		return ""
	}
	return p
}

// channelGrants returns the channel's grants for one step: asked of the bot the first time
// a call of the step needs them, and not again in that step. A failure to read them costs an
// approval, never a call run unasked.
func (r *runner) channelGrants(ctx context.Context) func() []Grant {
	var gs []Grant
	read := false
	return func() []Grant {
		if read || r.h.Grants == nil {
			return gs
		}
		read = true
		var err error
		if gs, err = r.h.Grants(ctx); err != nil {
			r.a.log.Warn("channel grants not read; calls will ask", "run", r.st.RunID, "err", err)
			gs = nil
		}
		return gs
	}
}

// applyGrant lets a call that would wait for approval run when a grant covers it, and notes
// which grant did, for the audit log. A call the data-flow guard holds is never covered.
func (r *runner) applyGrant(rec *CallRecord, args json.RawMessage, flowHeld bool, channel func() []Grant) {
	if rec.Status != CallAwaitingApproval {
		return
	}
	if flowHeld {
		rec.FlowHeld = true
		return
	}
	rec.GrantPattern = r.a.grantPattern(rec.Name, args, rec.Risk)
	g := r.grantFor(rec.Name, args, rec.Risk, channel)
	if g == nil {
		return
	}
	rec.Status = CallReady
	rec.GrantedBy = &GrantUse{ID: g.ID, Scope: g.Scope, Describe: g.Describe(), By: g.By}
}

// GrantUse says which grant let a call run without asking.
type GrantUse struct {
	ID       string     `json:"id"`
	Scope    GrantScope `json:"scope"`
	Describe string     `json:"describe"`
	By       string     `json:"by"`
}
