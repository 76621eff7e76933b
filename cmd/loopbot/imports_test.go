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

// Third-party packages that only the edges of the system may reach (docs/ARCHITECTURE.md,
// "Packages and the direction of imports").
var heavy = []string{
	"github.com/slack-go/slack",
	"github.com/bwmarrin/discordgo",
	"go.etcd.io/bbolt",
	"github.com/jackc/pgx",
	"github.com/sashabaranov/go-openai",
}

// backendDrivers are the storage engines of the store backends: each backend reaches its
// own only, so that a deployment on one links nothing of the other's through the other
// package, and the backends stay apart.
var backendDrivers = map[string]string{
	module + "/store":          "go.etcd.io/bbolt",
	module + "/store/postgres": "github.com/jackc/pgx",
}

// chatSDKs are the chat platforms' client libraries: only the adapters import them, so that
// one place knows each platform's API and cmd wires adapters without a client of its own.
var chatSDKs = []string{
	"github.com/slack-go/slack",
	"github.com/bwmarrin/discordgo",
}

// notInTheBinary are packages the loopbot binary must not link, with why: each made the idle
// daemon's resident set megabytes larger for little (README, "Figures").
var notInTheBinary = map[string]string{
	// text/template (under html/template) calls methods by name through reflection, which
	// makes the linker keep every exported method of every linked type: 6 MB of binary.
	"text/template": "its calls of methods by name keep every exported method",
	// gitleaks's config package loads its rules through viper, a config framework of a
	// dozen modules; the redactor reads the rules file itself.
	"github.com/spf13/viper":                    "a config framework the redactor does not need",
	"github.com/zricethezav/gitleaks/v8/config": "it loads its rules through viper",
	// The Prometheus client's data model is protocol buffers; /metrics is written by
	// cmd/loopbot/promtext.go.
	"github.com/prometheus/client_golang": "it brings the protobuf runtime",
	// Its init builds the metrics' descriptions at every start; promruntime.go reads GOGC.
	"runtime/metrics": "its init runs at every start for one figure",
}

// agentMayReach lists what package agent may depend on besides the standard library.
var agentMayReach = []string{"golang.org/x/", "github.com/google/jsonschema-go/"}

// backendOf returns the backend package pkg belongs to, the longest that holds it, or "".
func backendOf(pkg string) string {
	own := ""
	for backend := range backendDrivers {
		if under(pkg, backend) && len(backend) > len(own) {
			own = backend
		}
	}
	return own
}

// pkgImports is what go list says of one package: every package it reaches (Deps), and the
// packages its files, tests included, import directly.
type pkgImports struct {
	Deps    []string
	Imports []string
}

func under(pkg, prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }

// importRules checks a dependency graph against the rules and returns one line per
// violation.
func importRules(graph map[string]pkgImports) []string {
	var bad []string
	for pkg, p := range graph {
		rel := strings.TrimPrefix(pkg, module+"/")
		for _, imp := range p.Imports {
			for _, sdk := range chatSDKs {
				if under(imp, sdk) && !under(pkg, module+"/adapters") {
					bad = append(bad, rel+" imports "+imp+" (only adapters may import a chat SDK)")
				}
			}
		}
		for _, dep := range p.Deps {
			if pkg == module+"/agent" || pkg == module+"/bot" {
				for _, h := range heavy {
					if under(dep, h) {
						bad = append(bad, rel+" reaches "+dep)
					}
				}
			}
			if pkg == module+"/cmd/loopbot" {
				for banned, why := range notInTheBinary {
					if under(dep, banned) {
						bad = append(bad, rel+" reaches "+dep+" ("+why+")")
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
			if own := backendOf(pkg); own != "" {
				for backend, driver := range backendDrivers {
					if under(dep, driver) && backend != own {
						bad = append(bad, rel+" reaches "+dep+" (the driver of another backend)")
					}
				}
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
	out, err := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Deps,Imports,TestImports,XTestImports", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph := map[string]pkgImports{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath                               string
			Deps, Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		graph[p.ImportPath] = pkgImports{Deps: p.Deps, Imports: slices.Concat(p.Imports, p.TestImports, p.XTestImports)}
	}
	if !slices.ContainsFunc(graph[module+"/adapters/slack"].Imports, func(imp string) bool { return under(imp, chatSDKs[0]) }) {
		t.Fatal("go list did not report adapters/slack importing slack-go; the chat SDK rule would prove nothing")
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
		graph map[string]pkgImports
		want  string
	}{
		{"agent reaches go-openai", map[string]pkgImports{module + "/agent": {Deps: []string{"fmt", "github.com/sashabaranov/go-openai"}}}, "agent reaches github.com/sashabaranov/go-openai"},
		{"agent reaches other module", map[string]pkgImports{module + "/agent": {Deps: []string{"github.com/pkg/errors"}}}, "agent reaches non-standard github.com/pkg/errors"},
		{"bot reaches bbolt", map[string]pkgImports{module + "/bot": {Deps: []string{"go.etcd.io/bbolt"}}}, "bot reaches go.etcd.io/bbolt"},
		{"bot reaches slack-go subpackage", map[string]pkgImports{module + "/bot": {Deps: []string{"github.com/slack-go/slack/socketmode"}}}, "bot reaches github.com/slack-go/slack/socketmode"},
		{"adapter reaches store", map[string]pkgImports{module + "/adapters/slack": {Deps: []string{module + "/store"}}}, "adapters/slack reaches " + module + "/store (only cmd may use store)"},
		{"adapter reaches adapter", map[string]pkgImports{module + "/adapters/web": {Deps: []string{module + "/adapters/discord"}}}, "adapters/web reaches another adapter " + module + "/adapters/discord"},
		{"bot reaches store", map[string]pkgImports{module + "/bot": {Deps: []string{module + "/store"}}}, "bot reaches " + module + "/store (only cmd may use store)"},
		{"bot reaches pgx", map[string]pkgImports{module + "/bot": {Deps: []string{"github.com/jackc/pgx/v5/pgconn"}}}, "bot reaches github.com/jackc/pgx/v5/pgconn"},
		{"adapter reaches the postgres store", map[string]pkgImports{module + "/adapters/web": {Deps: []string{module + "/store/postgres"}}},
			"adapters/web reaches " + module + "/store/postgres (only cmd may use store)"},
		{"bbolt store reaches pgx", map[string]pkgImports{module + "/store": {Deps: []string{"github.com/jackc/pgx/v5"}}},
			"store reaches github.com/jackc/pgx/v5 (the driver of another backend)"},
		{"postgres store reaches bbolt", map[string]pkgImports{module + "/store/postgres": {Deps: []string{"go.etcd.io/bbolt"}}},
			"store/postgres reaches go.etcd.io/bbolt (the driver of another backend)"},
		{"cmd imports slack-go", map[string]pkgImports{module + "/cmd/loopbot": {Imports: []string{"fmt", "github.com/slack-go/slack"}}},
			"cmd/loopbot imports github.com/slack-go/slack (only adapters may import a chat SDK)"},
		{"cmd test imports slacktest", map[string]pkgImports{module + "/cmd/loopbot": {Imports: []string{"github.com/slack-go/slack/slacktest"}}},
			"cmd/loopbot imports github.com/slack-go/slack/slacktest (only adapters may import a chat SDK)"},
		{"cmd imports discordgo", map[string]pkgImports{module + "/cmd/loopbench": {Imports: []string{"github.com/bwmarrin/discordgo"}}},
			"cmd/loopbench imports github.com/bwmarrin/discordgo (only adapters may import a chat SDK)"},
		{"the binary links text/template", map[string]pkgImports{module + "/cmd/loopbot": {Deps: []string{"html/template", "text/template"}}},
			"cmd/loopbot reaches text/template (its calls of methods by name keep every exported method)"},
		{"the binary links prometheus", map[string]pkgImports{module + "/cmd/loopbot": {Deps: []string{"github.com/prometheus/client_golang/prometheus"}}},
			"cmd/loopbot reaches github.com/prometheus/client_golang/prometheus (it brings the protobuf runtime)"},
		{"tools imports discordgo", map[string]pkgImports{module + "/agent/tools": {Imports: []string{"github.com/bwmarrin/discordgo"}}},
			"agent/tools imports github.com/bwmarrin/discordgo (only adapters may import a chat SDK)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := importRules(tt.graph)
			if !slices.Contains(got, tt.want) {
				t.Errorf("violations = %q, want one to be %q", got, tt.want)
			}
		})
	}
	ok := map[string]pkgImports{
		module + "/agent":     {Deps: []string{"fmt", "golang.org/x/time/rate", "github.com/google/jsonschema-go/jsonschema", module + "/agent/internal/x"}},
		module + "/agent/llm": {Deps: []string{"github.com/sashabaranov/go-openai", module + "/agent"}},
		module + "/adapters/slack": {Deps: []string{"github.com/slack-go/slack", module + "/bot", module + "/adapters/slack/internal"},
			Imports: []string{"github.com/slack-go/slack", "github.com/slack-go/slack/socketmode"}},
		module + "/adapters/discord/discordfake": {Imports: []string{"github.com/bwmarrin/discordgo"}},
		// cmd reaches slack-go through the adapter, and imports only the adapter.
		module + "/cmd/loopbot": {Deps: []string{module + "/store", module + "/adapters/slack", "github.com/slack-go/slack"},
			Imports: []string{module + "/store", module + "/adapters/slack"}},
		module + "/store":           {Deps: []string{"go.etcd.io/bbolt", module + "/bot"}},
		module + "/store/postgres":  {Deps: []string{"github.com/jackc/pgx/v5", module + "/bot"}},
		module + "/store/storetest": {Deps: []string{module + "/bot"}},
	}
	if got := importRules(ok); len(got) > 0 {
		t.Errorf("a legal graph was flagged: %q", got)
	}
}
