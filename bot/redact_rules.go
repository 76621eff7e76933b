package bot

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/viper"
	gitleaks "github.com/zricethezav/gitleaks/v8/config"
)

// A rule finds one kind of credential. The secret is the match's group number grp (the
// first group that matched when grp is 0, the whole match when the pattern has no groups),
// and only the secret is replaced, so a label such as "Bearer " or "password=" stays
// readable.
type rule struct {
	id      string
	pattern string
	grp     int
	// keywords, lower-case, gate the rule: it runs only on text holding one of them, which
	// keeps a scan of a long tool output to the few rules that can match at all.
	keywords []string
	// entropy, when set, is the Shannon entropy in bits a secret must exceed: it tells a
	// random key from a word that happens to follow "key=".
	entropy float64
	// allow are gitleaks's allowlists of the rule (and the global ones): known examples,
	// placeholders and template variables that are not secrets.
	allow []*allowlist

	// re is compiled on the rule's first use: compiling all of them takes time and memory,
	// and most rules never meet their keyword.
	once sync.Once
	re   *regexp.Regexp
}

// localRules cover what gitleaks's rules, made to scan source code, miss in chat and in tool
// output: keys cut off before their END line, credentials behind a name in any case, HTTP
// authorization headers, passwords in URLs and tokens in query strings, and the key formats
// gitleaks matches more narrowly than they are issued.
var localRules = []*rule{
	// Private key blocks (PGP ones included), also one cut off before its END line.
	{id: "private-key-block", pattern: `(?s)-----BEGIN[A-Z0-9 _-]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z0-9 _-]*PRIVATE KEY(?: BLOCK)?-----|\z)`,
		keywords: []string{"private key"}},
	// Slack bot, user and app-level tokens.
	{id: "slack-token", pattern: `xox[abposre]-[A-Za-z0-9-]{10,}`, keywords: []string{"xox"}},
	{id: "slack-app-token", pattern: `xapp-[0-9]+-[A-Za-z0-9-]{10,}`, keywords: []string{"xapp-"}},
	// OpenAI and other "sk-" API keys, project and service-account keys included.
	{id: "sk-key", pattern: `sk-[A-Za-z0-9_-]{20,}`, keywords: []string{"sk-"}},
	// GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
	{id: "github-token", pattern: `gh[pousr]_[A-Za-z0-9]{30,}`, keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}},
	{id: "github-pat", pattern: `github_pat_[A-Za-z0-9_]{22,}`, keywords: []string{"github_pat_"}},
	// AWS access key IDs.
	{id: "aws-key-id", pattern: `\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`, keywords: []string{"akia", "asia"}},
	// Values after a name that says they are secret, as .env files, config files, JSON and
	// env print them: DB_PASSWORD=..., "db_password": "...", aws_secret_access_key = ....
	// The name must not follow "?", "&" or a word character: query strings have their own
	// rule, which stops at the next parameter.
	{id: "secret-name", pattern: `(?i)(?:^|[^\w?&])(?:[a-z0-9]+[_.-])*(?:secret|token|api_?key|access_?key|private_?key|credentials?)(?:[_.-][a-z0-9]+)*["']?\s*[=:]\s*["']?([^\s"']{8,})`,
		grp: 1, keywords: []string{"secret", "token", "key", "credential"}},
	// Passwords are often short, so any value after a password's name goes.
	{id: "password-name", pattern: `(?i)(?:^|[^\w?&])(?:[a-z0-9]+[_.-])*(?:password|passwd|pass)(?:[_.-][a-z0-9]+)*["']?\s*[=:]\s*["']?([^\s"']{3,})`,
		grp: 1, keywords: []string{"pass"}},
	// Credentials in query strings: ?api_key=..., &access_token=..., up to the next parameter.
	{id: "query-secret", pattern: `(?i)[?&;](?:[a-z0-9_.-]*(?:key|token|secret|passw(?:or)?d|password|signature|sig|auth|credential|session|code))=([^&#\s"'<>]+)`,
		grp: 1, keywords: []string{"key", "token", "secret", "passw", "sig", "auth", "credential", "session", "code"}},
	// Passwords in URLs: scheme://user:password@host.
	{id: "url-password", pattern: `\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:([^\s@/]+)@`, grp: 1, keywords: []string{"://"}},
	// JSON web tokens.
	{id: "jwt", pattern: `eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`, keywords: []string{"eyj"}},
	// Discord bot tokens: base64 user ID, timestamp and HMAC, dot-separated. Having no fixed
	// text of their own, they are looked for only near the word; the bot's own token is a
	// configured value and goes anywhere.
	{id: "discord-token", pattern: `\b[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}\b`, keywords: []string{"discord"}},
	// HTTP authorization headers of any scheme, and bearer tokens anywhere.
	{id: "authorization", pattern: `(?i)authorization["']?\s*[:=]\s*["']?(?:basic|bearer|token|digest|negotiate|ntlm|aws4-hmac-sha256)\s+([A-Za-z0-9._~+/=:,-]{4,})`,
		grp: 1, keywords: []string{"authorization"}},
	// Without a scheme the value must be long, or "Bearer" of "Bearer [redacted]" would go.
	{id: "authorization-raw", pattern: `(?i)authorization["']?\s*[:=]\s*["']?([A-Za-z0-9._~+/=:,-]{16,})`,
		grp: 1, keywords: []string{"authorization"}},
	{id: "bearer", pattern: `(?i)bearer\s+([A-Za-z0-9._~+/=-]{8,})`, grp: 1, keywords: []string{"bearer"}},
}

// gitleaksEnd is how most gitleaks rules end a token: before a quote, white space or
// semicolon, or at the end of the text. Prose and Markdown end one with punctuation as often,
// so at load time those characters are let in too; otherwise "key AIza....," would pass.
const (
	gitleaksEnd = `(?:[\x60'"\s;]|\\[nr]|$)`
	chatEnd     = `(?:[\x60'"\s;.,:!?()\[\]{}<>*~|&]|\\[nr]|$)`
)

// rules returns the rule set, loaded once: gitleaks's default rules plus localRules.
var rules = sync.OnceValues(func() ([]*rule, error) {
	gl, err := gitleaksRules()
	if err != nil {
		return nil, err
	}
	return append(gl, localRules...), nil
})

// gitleaksRules loads the rules and allowlists of gitleaks's default configuration, the
// maintained set behind its secret scanner.
func gitleaksRules() ([]*rule, error) {
	v := viper.New()
	v.SetConfigType("toml")
	if err := v.ReadConfig(strings.NewReader(gitleaks.DefaultConfig)); err != nil {
		return nil, fmt.Errorf("read gitleaks rules: %w", err)
	}
	var vc gitleaks.ViperConfig
	if err := v.Unmarshal(&vc); err != nil {
		return nil, fmt.Errorf("read gitleaks rules: %w", err)
	}
	cfg, err := vc.Translate()
	if err != nil {
		return nil, fmt.Errorf("load gitleaks rules: %w", err)
	}
	var out []*rule
	// The global allowlists are converted once and shared by every rule.
	global := map[*gitleaks.Allowlist]*allowlist{}
	for _, id := range cfg.OrderedRules {
		gr := cfg.Rules[id]
		// Rules that match file paths, or serve only as parts of composite rules, say
		// nothing about a message's text.
		if gr.Regex == nil || gr.Path != nil || gr.SkipReport || len(gr.RequiredRules) > 0 {
			continue
		}
		// Compiled on first use (rule.regexp); TestRulesCompile compiles every pattern.
		pattern := strings.ReplaceAll(gr.Regex.String(), gitleaksEnd, chatEnd)
		r := &rule{id: id, pattern: pattern, grp: gr.SecretGroup, entropy: gr.Entropy}
		for _, a := range append(append([]*gitleaks.Allowlist(nil), gr.Allowlists...), cfg.Allowlists...) {
			if global[a] == nil {
				global[a] = allowlistOf(a)
			}
			r.allow = append(r.allow, global[a])
		}
		for _, k := range gr.Keywords {
			r.keywords = append(r.keywords, strings.ToLower(k))
		}
		out = append(out, r)
	}
	return out, nil
}

// regexp returns the rule's expression, compiled on first use. Go's regexp is linear in the
// text but spends about a microsecond a byte on gitleaks's patterns (bounded repeats before
// and after a name), which is why rules scan only windows around their keywords. The
// pattern was checked when the rules were loaded.
func (r *rule) regexp() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.pattern) })
	return r.re
}

// find appends to spans the byte ranges of the secrets r finds in text.
func (r *rule) find(spans []span, text string, offset int) []span {
	re := r.regexp()
	// Most texts hold none of the rule's secrets, which matching tells fastest; finding the
	// groups is slower and only done for a text that matches.
	if !re.MatchString(text) {
		return spans
	}
	for _, m := range re.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[0], m[1]
		switch {
		case r.grp > 0 && 2*r.grp+1 < len(m):
			start, end = m[2*r.grp], m[2*r.grp+1]
		case r.grp == 0:
			// gitleaks takes the first group that matched, when there is one.
			for g := 1; 2*g+1 < len(m); g++ {
				if m[2*g] >= 0 && m[2*g+1] > m[2*g] {
					start, end = m[2*g], m[2*g+1]
					break
				}
			}
		}
		if start < 0 || end <= start {
			continue
		}
		secret := text[start:end]
		if r.entropy > 0 && entropy(secret) <= r.entropy {
			continue
		}
		if r.allowed(text, secret, m[0], m[1]) {
			continue
		}
		spans = append(spans, span{offset + start, offset + end})
	}
	return spans
}

// reach is how far after a keyword a secret of the rule may end: key blocks and tokens
// that carry a whole document (JWTs, certificates) run long, anything else ends within a
// few hundred bytes.
func (r *rule) reach() int {
	p := strings.ToUpper(r.pattern)
	if strings.Contains(p, "PRIVATE") || strings.Contains(p, "BEGIN") || strings.Contains(strings.ToLower(r.id), "jwt") ||
		strings.Contains(r.pattern, "(?s)") || strings.Contains(r.pattern, `[\s\S`) {
		return 64 << 10
	}
	return 1024
}

// allowlist is what the redactor needs of a gitleaks allowlist. gitleaks's own type keeps,
// for its stop words, an Aho-Corasick trie that took 8.6 MB of heap for as long as the
// process ran; a finding is rare next to the texts scanned, so its stop words are looked
// for one by one instead, which is what gitleaks itself does for an allowlist without a
// trie.
type allowlist struct {
	// and is gitleaks's AND condition: every kind of check listed must hold, where one
	// suffices otherwise. never is set for an AND on commits or paths, which never holds for
	// a message.
	and, never bool
	// target is what the regexes look at: the secret (""), the whole match ("match") or its
	// lines ("line").
	target    string
	regexes   []*regexp.Regexp
	stopWords []string // lower case
}

func allowlistOf(a *gitleaks.Allowlist) *allowlist {
	out := &allowlist{and: a.MatchCondition == gitleaks.AllowlistMatchAnd, target: a.RegexTarget, regexes: a.Regexes}
	out.never = out.and && (len(a.Commits) > 0 || len(a.Paths) > 0)
	for _, w := range a.StopWords {
		out.stopWords = append(out.stopWords, strings.ToLower(w))
	}
	return out
}

// allowed reports whether one of the rule's allowlists says the finding is no secret, the
// way gitleaks decides it for a file without a path or commit.
func (r *rule) allowed(text, secret string, start, end int) bool {
	for _, a := range r.allow {
		if a.never {
			continue
		}
		target := secret
		switch a.target {
		case "match":
			target = text[start:end]
		case "line":
			target = lineAround(text, start, end)
		}
		re := target != "" && slices.ContainsFunc(a.regexes, func(x *regexp.Regexp) bool { return x.MatchString(target) })
		lower := strings.ToLower(secret)
		stop := secret != "" && slices.ContainsFunc(a.stopWords, func(w string) bool { return strings.Contains(lower, w) })
		if a.and {
			if (len(a.regexes) == 0 || re) && (len(a.stopWords) == 0 || stop) && (len(a.regexes) > 0 || len(a.stopWords) > 0) {
				return true
			}
			continue
		}
		if re || stop {
			return true
		}
	}
	return false
}

// lineAround returns the lines of text that hold [start, end).
func lineAround(text string, start, end int) string {
	from := strings.LastIndexByte(text[:start], '\n') + 1
	to := strings.IndexByte(text[end:], '\n')
	if to < 0 {
		return text[from:]
	}
	return text[from : end+to]
}

// entropy is the Shannon entropy of s in bits per character, as gitleaks computes it.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, c := range s {
		counts[c]++
	}
	var h float64
	for _, n := range counts {
		p := float64(n) / float64(len(s))
		h -= p * math.Log2(p)
	}
	return h
}
