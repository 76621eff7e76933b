package bot

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/viper"
	gitleaks "github.com/zricethezav/gitleaks/v8/config"
)

// TestRulesCompile compiles every rule's pattern, gitleaks's (as loopbot rewrites their ends)
// and the local ones, and every allowlist's: they are compiled on first use in production,
// where a bad pattern would only show when its keyword first appears.
func TestRulesCompile(t *testing.T) {
	rs, err := rules()
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) < 200 {
		t.Fatalf("%d rules loaded, want gitleaks's default set and the local ones", len(rs))
	}
	for _, r := range rs {
		if _, err := regexp.Compile(r.pattern); err != nil {
			t.Errorf("rule %s: %v", r.id, err)
		}
		for _, a := range r.allow {
			if len(a.patterns) == 0 {
				continue
			}
			if _, err := regexp.Compile("(?:" + strings.Join(a.patterns, "|") + ")"); err != nil {
				t.Errorf("rule %s: allowlist: %v", r.id, err)
			}
		}
	}
}

// TestGitleaksRulesAreTheModules holds the embedded copy of gitleaks's default rules to the
// gitleaks module go.mod names, so that updating the module updates the rules.
func TestGitleaksRulesAreTheModules(t *testing.T) {
	if !bytes.Equal(gitleaksConfig, []byte(gitleaks.DefaultConfig)) {
		t.Fatal("bot/gitleaks.toml is not the gitleaks module's default configuration; copy it: " +
			"cp \"$(go list -m -f '{{.Dir}}' github.com/zricethezav/gitleaks/v8)/config/gitleaks.toml\" bot/gitleaks.toml")
	}
}

// TestRulesMatchGitleaksLoader loads the default rules through gitleaks's own loader (viper
// and config.Translate, which the binary no longer links) and checks that loopbot's loader
// reads the same rules, keywords, secret groups, entropies and allowlists from them.
func TestRulesMatchGitleaksLoader(t *testing.T) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(gitleaks.DefaultConfig)); err != nil {
		t.Fatal(err)
	}
	var vc gitleaks.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		t.Fatal(err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range cfg.OrderedRules {
		gr := cfg.Rules[id]
		if gr.Regex == nil || gr.Path != nil || gr.SkipReport || len(gr.RequiredRules) > 0 {
			continue
		}
		lines := []string{"rule " + id + " " + strings.ReplaceAll(gr.Regex.String(), gitleaksEnd, chatEnd),
			fmt.Sprintf("group %d entropy %v", gr.SecretGroup, gr.Entropy), "keywords " + strings.Join(gr.Keywords, ",")}
		for _, a := range append(append([]*gitleaks.Allowlist(nil), gr.Allowlists...), cfg.Allowlists...) {
			var res []string
			for _, re := range a.Regexes {
				res = append(res, re.String())
			}
			words := slices.Clone(a.StopWords)
			slices.Sort(words)
			lines = append(lines, describeAllowlist(a.MatchCondition == gitleaks.AllowlistMatchAnd,
				len(a.Commits) > 0 || len(a.Paths) > 0, a.RegexTarget, res, words))
		}
		want = append(want, lines...)
	}
	rs, err := gitleaksRules()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		got = append(got, "rule "+r.id+" "+r.pattern, fmt.Sprintf("group %d entropy %v", r.grp, r.entropy), "keywords "+strings.Join(r.keywords, ","))
		for _, a := range r.allow {
			words := slices.Clone(a.stopwords)
			slices.Sort(words)
			got = append(got, describeAllowlist(a.and, a.onFiles, a.target, a.patterns, words))
		}
	}
	if len(got) != len(want) {
		t.Errorf("loopbot's loader gives %d lines, gitleaks's %d", len(got), len(want))
	}
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("line %d:\n got %.300s\nwant %.300s", i, got[i], want[i])
		}
	}
}

func describeAllowlist(and, onFiles bool, target string, regexes, stopwords []string) string {
	return fmt.Sprintf("allow and=%v files=%v target=%q regexes=%s stopwords=%s",
		and, onFiles, target, strings.Join(regexes, "|"), strings.Join(stopwords, ","))
}
