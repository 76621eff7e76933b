package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/loopbot/loopbot/agent"
)

// patTool is a fake Grantable tool whose pattern is the first word of its q argument, with
// the risk and data flow a test sets.
type patTool struct {
	*fakeTool
	risk  agent.Risk
	sends string
}

func (p patTool) Assess(json.RawMessage) agent.Assessment {
	return agent.Assessment{Risk: p.risk, Reason: "test", Sends: p.sends, Carries: p.sends != ""}
}

func (p patTool) GrantPattern(raw json.RawMessage) (string, bool) {
	var a struct{ Q string }
	if json.Unmarshal(raw, &a) != nil || a.Q == "" {
		return "", false
	}
	return strings.Fields(a.Q)[0], true
}

func (p patTool) GrantCovers(pattern string, raw json.RawMessage) bool {
	got, ok := p.GrantPattern(raw)
	return ok && got == pattern
}

// TestGrantScope walks what a grant covers: the run's grant covers its tool at its risk or
// lower; the channel's covers its tool and pattern; neither covers a dangerous call, a call
// the data-flow guard holds, or a call carrying a secret.
func TestGrantScope(t *testing.T) {
	run := func(risk agent.Risk) agent.Grant {
		return agent.Grant{ID: "g1", Scope: agent.GrantRun, Tool: "act", MaxRisk: risk, By: "ann"}
	}
	channel := func(pattern string, risk agent.Risk) agent.Grant {
		return agent.Grant{ID: "g2", Scope: agent.GrantChannel, Tool: "act", Pattern: pattern, MaxRisk: risk, By: "ann"}
	}
	tests := []struct {
		name     string
		risk     agent.Risk
		sends    string
		exposed  bool
		args     string
		runG     []agent.Grant
		channelG []agent.Grant
		want     agent.CallStatus
		wantPat  string
	}{
		{"no grant asks", agent.RiskConfirm, "", false, `{"q":"make test"}`, nil, nil, agent.CallAwaitingApproval, "make"},
		{"run grant covers same risk", agent.RiskConfirm, "", false, `{"q":"make test"}`, []agent.Grant{run(agent.RiskConfirm)}, nil, agent.CallSucceeded, "make"},
		{"run grant does not cover higher risk", agent.RiskConfirm, "", false, `{"q":"x"}`, []agent.Grant{run(agent.RiskCautious)}, nil, agent.CallAwaitingApproval, "x"},
		{"run grant of another tool", agent.RiskConfirm, "", false, `{"q":"x"}`, []agent.Grant{{ID: "g", Scope: agent.GrantRun, Tool: "other", MaxRisk: agent.RiskConfirm}}, nil, agent.CallAwaitingApproval, "x"},
		{"dangerous never covered", agent.RiskDangerous, "", false, `{"q":"x"}`, []agent.Grant{run(agent.RiskDangerous)}, []agent.Grant{channel("x", agent.RiskDangerous)}, agent.CallAwaitingApproval, ""},
		{"channel grant covers its pattern", agent.RiskConfirm, "", false, `{"q":"make test"}`, nil, []agent.Grant{channel("make", agent.RiskConfirm)}, agent.CallSucceeded, "make"},
		{"channel grant not another pattern", agent.RiskConfirm, "", false, `{"q":"rm x"}`, nil, []agent.Grant{channel("make", agent.RiskConfirm)}, agent.CallAwaitingApproval, "rm"},
		{"channel grant without pattern covers nothing", agent.RiskConfirm, "", false, `{"q":"rm x"}`, nil, []agent.Grant{channel("", agent.RiskConfirm)}, agent.CallAwaitingApproval, "rm"},
		{"flow guard holds despite grants", agent.RiskSafe, "sink.example", true, `{"q":"make"}`, []agent.Grant{run(agent.RiskConfirm)}, []agent.Grant{channel("make", agent.RiskConfirm)}, agent.CallAwaitingApproval, ""},
		{"secret refused despite grants", agent.RiskConfirm, "sink.example", false, `{"q":"sk_live_1"}`, []agent.Grant{run(agent.RiskConfirm)}, nil, agent.CallInvalid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := flowTool{fakeTool: &fakeTool{name: "read", readOnly: true}, reads: "https://page.example/x"}
			act := patTool{fakeTool: &fakeTool{name: "act"}, risk: tt.risk, sends: tt.sends}
			var steps []step
			if tt.exposed {
				steps = append(steps, calls(call("read", `{"q":"page"}`)))
			}
			steps = append(steps, calls(call("act", tt.args)), text("done"))
			llm := newLLM(t, steps...)
			ag := newAgent(t, llm.model, agent.Config{}, []agent.Tool{read, act},
				agent.WithSecretScan(func(s string) bool { return strings.Contains(s, "sk_live_") }))
			r := newRun(t, ag, "do the thing")
			r.st.Grants = tt.runG
			h := r.hooks()
			h.Grants = func(context.Context) ([]agent.Grant, error) { return tt.channelG, nil }
			if err := ag.Run(context.Background(), r.st, h); err != nil {
				t.Fatal(err)
			}
			c := r.st.Calls[len(r.st.Calls)-1]
			if c.Status != tt.want {
				t.Fatalf("call is %s (%q, %q), want %s", c.Status, c.RiskReason, c.Error, tt.want)
			}
			if c.GrantPattern != tt.wantPat {
				t.Errorf("grant pattern %q, want %q", c.GrantPattern, tt.wantPat)
			}
			if (tt.want == agent.CallSucceeded) != (c.GrantedBy != nil) {
				t.Errorf("granted by %+v", c.GrantedBy)
			}
			if tt.want != agent.CallSucceeded && act.calls.Load() != 0 {
				t.Errorf("the tool ran %d times", act.calls.Load())
			}
		})
	}
}

// TestGrantRunRefusesDangerous: a dangerous call cannot be granted for the run, and a grant
// of a lower risk is kept in the state, so it outlives a restart.
func TestGrantRunRefusesDangerous(t *testing.T) {
	st := agent.NewState("r1", "goal", nil, time.Now())
	if _, err := st.GrantRun(&agent.CallRecord{Name: "shell", Risk: agent.RiskDangerous}, "g", "ann", time.Now()); err == nil {
		t.Fatal("a dangerous call was granted for the run")
	}
	if _, err := st.GrantRun(&agent.CallRecord{Name: "shell", Risk: agent.RiskConfirm}, "g", "ann", time.Now()); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(st)
	back, err := agent.UnmarshalState(b)
	if err != nil || len(back.Grants) != 1 || back.Grants[0].MaxRisk != agent.RiskConfirm {
		t.Fatalf("grants after a round trip: %+v, %v", back.Grants, err)
	}
}
