package bot

import (
	"bytes"
	_ "embed"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
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

// gitleaksConfig is gitleaks's default configuration (config/gitleaks.toml of the
// github.com/zricethezav/gitleaks/v8 module that go.mod names, MIT licensed, see
// gitleaks.LICENSE), copied byte for byte: TestGitleaksRulesAreTheModules says when the
// module moves on. loopbot reads it with its own small loader rather than through gitleaks's
// config package, which brings in viper and a logger and compiles all 222 patterns at load:
// that loader was a fifth of the binary's packages and about 25 MB of the peak RSS.
//
//go:embed gitleaks.toml
var gitleaksConfig []byte

// gitleaksFile is the part of gitleaks's configuration format the default configuration
// uses. It is decoded strictly, so a key a later version adds fails TestRulesCompile
// instead of being dropped without a word.
type gitleaksFile struct {
	Title      string `toml:"title"`
	MinVersion string `toml:"minVersion"`
	Rules      []struct {
		ID          string   `toml:"id"`
		Description string   `toml:"description"`
		Regex       string   `toml:"regex"`
		Path        string   `toml:"path"`
		SecretGroup int      `toml:"secretGroup"`
		Entropy     float64  `toml:"entropy"`
		Keywords    []string `toml:"keywords"`
		Tags        []string `toml:"tags"`
		SkipReport  bool     `toml:"skipReport"`
		Required    []struct {
			ID            string `toml:"id"`
			WithinLines   *int   `toml:"withinLines"`
			WithinColumns *int   `toml:"withinColumns"`
		} `toml:"required"`
		AllowList  *gitleaksAllowlist  `toml:"allowlist"` // the format before [[rules.allowlists]]
		Allowlists []gitleaksAllowlist `toml:"allowlists"`
	} `toml:"rules"`
	AllowList  *gitleaksAllowlist  `toml:"allowlist"` // the format before [[allowlists]]
	Allowlists []gitleaksAllowlist `toml:"allowlists"`
}

type gitleaksAllowlist struct {
	Description string   `toml:"description"`
	Condition   string   `toml:"condition"`
	Commits     []string `toml:"commits"`
	Paths       []string `toml:"paths"`
	RegexTarget string   `toml:"regexTarget"`
	Regexes     []string `toml:"regexes"`
	StopWords   []string `toml:"stopwords"`
	TargetRules []string `toml:"targetRules"` // of global allowlists only
}

// An allowlist says a finding is no secret, as gitleaks's config.Allowlist decides it for a
// text that has no path or commit.
type allowlist struct {
	and bool // every check given must hold, not one of them
	// onFiles: the allowlist checks commits or paths, which a message never has.
	onFiles bool
	// target is what the regexes test: the secret (""), the whole "match" or the "line".
	target string
	// patterns are tested as one expression, compiled on first use like the rules'.
	patterns []string
	once     sync.Once
	re       *regexp.Regexp
	// stopwords, lower-case, allow a secret that holds one of them.
	stopwords []string
}

// gitleaksRules loads the rules and allowlists of gitleaks's default configuration, the
// maintained set behind its secret scanner, the way gitleaks's own loader reads them.
// TestRulesMatchGitleaksLoader holds the two to the same result.
func gitleaksRules() ([]*rule, error) {
	var f gitleaksFile
	dec := toml.NewDecoder(bytes.NewReader(gitleaksConfig))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("read gitleaks rules: %w", err)
	}
	if f.AllowList != nil {
		f.Allowlists = append(f.Allowlists, *f.AllowList)
	}
	var global []*allowlist
	targeted := map[string][]*allowlist{}
	for _, ga := range f.Allowlists {
		a, err := newAllowlist(ga)
		if err != nil {
			return nil, fmt.Errorf("load gitleaks rules: global allowlist: %w", err)
		}
		if len(ga.TargetRules) == 0 {
			global = append(global, a)
		}
		for _, id := range ga.TargetRules {
			targeted[id] = append(targeted[id], a)
		}
	}
	var out []*rule
	for _, gr := range f.Rules {
		// Rules that match file paths, or serve only as parts of composite rules, say
		// nothing about a message's text.
		if gr.Regex == "" || gr.Path != "" || gr.SkipReport || len(gr.Required) > 0 {
			continue
		}
		if gr.AllowList != nil {
			gr.Allowlists = append(gr.Allowlists, *gr.AllowList)
		}
		// Compiled on first use (rule.regexp); TestRulesCompile compiles every pattern.
		pattern := strings.ReplaceAll(gr.Regex, gitleaksEnd, chatEnd)
		r := &rule{id: gr.ID, pattern: pattern, grp: gr.SecretGroup, entropy: gr.Entropy}
		for _, ga := range gr.Allowlists {
			a, err := newAllowlist(ga)
			if err != nil {
				return nil, fmt.Errorf("load gitleaks rules: %s: %w", gr.ID, err)
			}
			r.allow = append(r.allow, a)
		}
		r.allow = append(append(r.allow, targeted[gr.ID]...), global...)
		for _, k := range gr.Keywords {
			r.keywords = append(r.keywords, strings.ToLower(k))
		}
		out = append(out, r)
	}
	return out, nil
}

// newAllowlist checks one of gitleaks's allowlists as its loader does.
func newAllowlist(ga gitleaksAllowlist) (*allowlist, error) {
	a := &allowlist{onFiles: len(ga.Commits) > 0 || len(ga.Paths) > 0, patterns: ga.Regexes}
	switch strings.ToUpper(ga.Condition) {
	case "AND", "&&":
		a.and = true
	case "", "OR", "||":
	default:
		return nil, fmt.Errorf("unknown allowlist condition %q", ga.Condition)
	}
	switch ga.RegexTarget {
	case "", "secret":
	case "match", "line":
		a.target = ga.RegexTarget
	default:
		return nil, fmt.Errorf("unknown allowlist regexTarget %q", ga.RegexTarget)
	}
	if !a.onFiles && len(ga.Regexes) == 0 && len(ga.StopWords) == 0 {
		return nil, fmt.Errorf("empty allowlist")
	}
	for _, w := range ga.StopWords {
		if w = strings.ToLower(w); !slices.Contains(a.stopwords, w) {
			a.stopwords = append(a.stopwords, w)
		}
	}
	return a, nil
}

// regexp returns the allowlist's patterns as one expression, compiled on first use, as
// gitleaks joins them.
func (a *allowlist) regexp() *regexp.Regexp {
	a.once.Do(func() { a.re = regexp.MustCompile("(?:" + strings.Join(a.patterns, "|") + ")") })
	return a.re
}

// regexAllowed reports whether one of the patterns matches s.
func (a *allowlist) regexAllowed(s string) bool {
	return len(a.patterns) > 0 && s != "" && a.regexp().MatchString(s)
}

// stopped reports whether the secret holds one of the stop words.
func (a *allowlist) stopped(secret string) bool {
	if len(a.stopwords) == 0 || secret == "" {
		return false
	}
	secret = strings.ToLower(secret)
	for _, w := range a.stopwords {
		if strings.Contains(secret, w) {
			return true
		}
	}
	return false
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

// allowed reports whether one of the rule's allowlists says the finding is no secret, the
// way gitleaks decides it for a file without a path or commit.
func (r *rule) allowed(text, secret string, start, end int) bool {
	for _, a := range r.allow {
		if a.and && a.onFiles {
			// A condition on commits or paths never holds for a message.
			continue
		}
		target := secret
		switch a.target {
		case "match":
			target = text[start:end]
		case "line":
			target = lineAround(text, start, end)
		}
		re := a.regexAllowed(target)
		stop := a.stopped(secret)
		if a.and {
			if (len(a.patterns) == 0 || re) && (len(a.stopwords) == 0 || stop) && (len(a.patterns) > 0 || len(a.stopwords) > 0) {
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
