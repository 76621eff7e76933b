package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/loopbot/loopbot"

// Third-party packages that only the edges of the system may reach (DESIGN.md, "Packages and
// the direction of imports").
var heavy = []string{
	"github.com/slack-go/slack",
	"github.com/bwmarrin/discordgo",
	"go.etcd.io/bbolt",
	"github.com/sashabaranov/go-openai",
}

// agentMayReach lists what package agent may depend on besides the standard library.
var agentMayReach = []string{"golang.org/x/", "github.com/google/jsonschema-go/"}

// importRules checks a dependency graph (package -> every package it reaches) against the
// rules and returns one line per violation.
func importRules(graph map[string][]string) []string {
	var bad []string
	under := func(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }
	for pkg, deps := range graph {
		rel := strings.TrimPrefix(pkg, module+"/")
		for _, dep := range deps {
			if pkg == module+"/agent" || pkg == module+"/bot" {
				for _, h := range heavy {
					if under(dep, h) {
						bad = append(bad, rel+" reaches "+dep)
					}
				}
			}
			if pkg == module+"/agent" && !isStd(dep) && !under(dep, module+"/agent") &&
				!slices.ContainsFunc(agentMayReach, func(p string) bool { return strings.HasPrefix(dep+"/", p) }) {
				bad = append(bad, rel+" reaches non-standard "+dep)
			}
			if under(dep, module+"/store") && !under(pkg, module+"/cmd") && !under(pkg, module+"/store") {
				bad = append(bad, rel+" reaches "+dep+" (only cmd may use store)")
			}
			if strings.HasPrefix(rel, "adapters/") {
				own := module + "/" + strings.Join(strings.SplitN(rel, "/", 3)[:2], "/")
				if under(dep, module+"/adapters") && !under(dep, own) {
					bad = append(bad, rel+" reaches another adapter "+dep)
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// isStd reports whether an import path is in the standard library: its first element has no
// dot.
func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		graph[p.ImportPath] = p.Deps
	}
	for _, must := range []string{module + "/agent", module + "/bot"} {
		if _, ok := graph[must]; !ok {
			t.Fatalf("go list did not report %s; the rule check would prove nothing", must)
		}
	}
	for _, v := range importRules(graph) {
		t.Error(v)
	}
}

// TestImportRulesCatchViolations feeds the checker graphs that break each rule, so the real
// check above cannot pass by checking nothing.
func TestImportRulesCatchViolations(t *testing.T) {
	tests := []struct {
		name  string
		graph map[string][]string
		want  string
	}{
		{"agent reaches go-openai", map[string][]string{module + "/agent": {"fmt", "github.com/sashabaranov/go-openai"}}, "agent reaches github.com/sashabaranov/go-openai"},
		{"agent reaches other module", map[string][]string{module + "/agent": {"github.com/pkg/errors"}}, "agent reaches non-standard github.com/pkg/errors"},
		{"bot reaches bbolt", map[string][]string{module + "/bot": {"go.etcd.io/bbolt"}}, "bot reaches go.etcd.io/bbolt"},
		{"bot reaches slack-go subpackage", map[string][]string{module + "/bot": {"github.com/slack-go/slack/socketmode"}}, "bot reaches github.com/slack-go/slack/socketmode"},
		{"adapter reaches store", map[string][]string{module + "/adapters/slack": {module + "/store"}}, "adapters/slack reaches " + module + "/store (only cmd may use store)"},
		{"adapter reaches adapter", map[string][]string{module + "/adapters/web": {module + "/adapters/discord"}}, "adapters/web reaches another adapter " + module + "/adapters/discord"},
		{"bot reaches store", map[string][]string{module + "/bot": {module + "/store"}}, "bot reaches " + module + "/store (only cmd may use store)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := importRules(tt.graph)
			if !slices.Contains(got, tt.want) {
				t.Errorf("violations = %q, want one to be %q", got, tt.want)
			}
		})
	}
	ok := map[string][]string{
		module + "/agent":          {"fmt", "golang.org/x/time/rate", "github.com/google/jsonschema-go/jsonschema", module + "/agent/internal/x"},
		module + "/agent/llm":      {"github.com/sashabaranov/go-openai", module + "/agent"},
		module + "/adapters/slack": {"github.com/slack-go/slack", module + "/bot", module + "/adapters/slack/internal"},
		module + "/cmd/loopbot":    {module + "/store", module + "/adapters/slack"},
		module + "/store":          {"go.etcd.io/bbolt", module + "/bot"},
	}
	if got := importRules(ok); len(got) > 0 {
		t.Errorf("a legal graph was flagged: %q", got)
	}
}
