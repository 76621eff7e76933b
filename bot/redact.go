package bot

import (
	"slices"
	"strings"
	"sync"

	ahocorasick "github.com/BobuSumisu/aho-corasick"
)

// redacted replaces every secret the Redactor finds.
const redacted = "[redacted]"

// minSecretLen is the shortest configured value that is redacted: a shorter one would blank
// out ordinary words and numbers everywhere, and is not a credential anyway.
const minSecretLen = 4

// maxPasses bounds how often Redact scans its own output: replacing one secret can, rarely,
// complete the shape of another (a name and a value brought together), and a second pass
// finds it.
const maxPasses = 4

// Redactor removes secrets from text before it is posted or shown: every credential format
// of gitleaks's maintained rule set and of localRules, and the configured values in plain
// and encoded forms. Text is also looked at with invisible characters and Markdown
// emphasis markers left out, so a token split by them is still found. It is safe for
// concurrent use.
type Redactor struct {
	// values are the configured secrets and their encoded forms, longest first, so a value
	// that contains another is removed whole.
	values []string
	// memo remembers what recent short texts of outgoing messages redacted to
	// (redact_memo.go).
	memo redactMemo
}

// ruleSet is the rules every Redactor applies, with their keywords indexed for the
// prefilter.
type ruleSet struct {
	rules []*rule
	// keywords are every rule's keywords once; ruleKeys[i] indexes rule i's.
	keywords []string
	ruleKeys [][]int
	// keyRules[k] indexes the rules keyword k gates, and bare the rules no keyword gates: a
	// text runs only the rules of the keywords it holds, so one that holds none (most button
	// labels, titles and footers) runs none of them.
	keyRules [][]int
	bare     []int
	// reach[i] is rule i's reach, worked out once: every text scanned asks it of every
	// rule, and working it out takes case conversions of the rule's pattern.
	reach []int
	trie  *ahocorasick.Trie
}

// loadRules builds the rule set on the first text there is to redact, not at start: loading
// gitleaks's rules takes a tenth of a second and tens of megabytes, which a process that has
// posted nothing yet need not pay. The rules are compiled into the binary, so a failure is a
// bug that every test shows.
var loadRules = sync.OnceValue(func() *ruleSet {
	rs, err := rules()
	if err != nil {
		panic(err)
	}
	set := &ruleSet{rules: rs}
	index := map[string]int{}
	for _, ru := range rs {
		var ks []int
		for _, k := range ru.keywords {
			i, ok := index[k]
			if !ok {
				i = len(set.keywords)
				index[k] = i
				set.keywords = append(set.keywords, k)
			}
			ks = append(ks, i)
		}
		set.ruleKeys = append(set.ruleKeys, ks)
		set.reach = append(set.reach, ru.reach())
	}
	set.keyRules = make([][]int, len(set.keywords))
	for i, ks := range set.ruleKeys {
		if len(ks) == 0 {
			set.bare = append(set.bare, i)
		}
		for _, k := range ks {
			set.keyRules[k] = append(set.keyRules[k], i)
		}
	}
	set.trie = ahocorasick.NewTrieBuilder().AddStrings(set.keywords).Build()
	return set
})

// NewRedactor returns a Redactor for the built-in rules plus values. Values shorter than
// four characters, and values "[redacted]" itself contains, are ignored.
func NewRedactor(values []string) *Redactor {
	r := &Redactor{}
	var vs []string
	for _, v := range values {
		if v = strings.TrimSpace(v); len(v) < minSecretLen || strings.Contains(redacted, v) {
			continue
		}
		vs = append(vs, v)
		for _, f := range encodedForms(v) {
			if !strings.Contains(redacted, f) {
				vs = append(vs, f)
			}
		}
	}
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	r.values = slices.Compact(vs)
	return r
}

// Redact returns s with every secret replaced by "[redacted]".
func (r *Redactor) Redact(s string) string {
	for range maxPasses {
		out := r.redactOnce(s)
		if out == s {
			break
		}
		s = out
	}
	return s
}

// redactOnce replaces the secrets found in s and in its views.
func (r *Redactor) redactOnce(s string) string {
	var spans []span
	for _, v := range append([]view{{text: s}}, views(s)...) {
		for _, sp := range r.find(v.text) {
			spans = append(spans, v.toOriginal(sp))
		}
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	b.Grow(len(s))
	at := 0
	for i := 0; i < len(spans); {
		cur := spans[i]
		// Overlapping and touching secrets are one.
		for i++; i < len(spans) && spans[i].start <= cur.end; i++ {
			cur.end = max(cur.end, spans[i].end)
		}
		b.WriteString(s[at:cur.start])
		b.WriteString(redacted)
		at = cur.end
	}
	b.WriteString(s[at:])
	return b.String()
}

// find returns the ranges of text that hold secrets.
func (r *Redactor) find(text string) []span {
	var spans []span
	for _, v := range r.values {
		for i := 0; ; {
			j := strings.Index(text[i:], v)
			if j < 0 {
				break
			}
			spans = append(spans, span{i + j, i + j + len(v)})
			i += j + len(v)
		}
	}
	// One Aho-Corasick pass finds where each keyword occurs, as gitleaks's own prefilter
	// does. A rule with keywords runs only near them: every secret its pattern matches holds,
	// or sits right after, one of its keywords, and Go's regexp costs about a microsecond a
	// byte on these patterns, so scanning windows rather than the whole text is what keeps a
	// long message cheap.
	set := loadRules()
	var at map[int][]int // keyword -> where it occurs; nil when none does
	set.trie.Walk(asciiLower(text), func(end, n, k int64) bool {
		if at == nil {
			at = map[int][]int{}
		}
		at[int(k)] = append(at[int(k)], int(end-n))
		return true
	})
	for _, i := range set.bare {
		spans = set.rules[i].find(spans, text, 0)
	}
	if at == nil {
		return spans
	}
	gated := map[int]bool{}
	for k := range at {
		for _, i := range set.keyRules[k] {
			gated[i] = true
		}
	}
	for i := range gated {
		for _, w := range set.windows(i, at, len(text)) {
			spans = set.rules[i].find(spans, text[w.start:w.end], w.start)
		}
	}
	return spans
}

// Around a keyword found at i, a rule scans text[i-windowBefore : i+reach]: gitleaks's
// patterns allow a name of up to about fifty characters and a few separators before the
// keyword, and reach is the longest secret the rule can match after it.
const windowBefore = 160

// windows returns the merged ranges of a text of length n that rule i scans, given where
// each keyword occurs.
func (set *ruleSet) windows(i int, at map[int][]int, n int) []span {
	reach := set.reach[i]
	var ws []span
	for _, k := range set.ruleKeys[i] {
		for _, p := range at[k] {
			ws = append(ws, span{max(0, p-windowBefore), min(n, p+reach)})
		}
	}
	if len(ws) < 2 {
		return ws
	}
	slices.SortFunc(ws, func(a, b span) int { return a.start - b.start })
	out := ws[:1]
	for _, w := range ws[1:] {
		if last := &out[len(out)-1]; w.start <= last.end {
			last.end = max(last.end, w.end)
			continue
		}
		out = append(out, w)
	}
	return out
}

// asciiLower returns s with ASCII letters in lower case, the case of every keyword.
func asciiLower(s string) []byte {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return b
}

// message returns a copy of m with every text a person reads redacted. Button IDs are
// opaque and left alone.
func (r *Redactor) message(m Message) Message {
	m.Title = r.redactMemoized(m.Title)
	m.Text = r.redactMemoized(m.Text)
	m.Footer = r.redactMemoized(m.Footer)
	m.Plan = slices.Clone(m.Plan)
	for i := range m.Plan {
		m.Plan[i].Text = r.redactMemoized(m.Plan[i].Text)
	}
	m.Fields = slices.Clone(m.Fields)
	for i := range m.Fields {
		m.Fields[i].Name = r.redactMemoized(m.Fields[i].Name)
		m.Fields[i].Value = r.redactMemoized(m.Fields[i].Value)
	}
	m.Buttons = slices.Clone(m.Buttons)
	for i := range m.Buttons {
		m.Buttons[i].Label = r.redactMemoized(m.Buttons[i].Label)
		m.Buttons[i].Confirm = r.redactMemoized(m.Buttons[i].Confirm)
	}
	m.Steps = slices.Clone(m.Steps)
	for i := range m.Steps {
		m.Steps[i].Args = r.redactMemoized(m.Steps[i].Args)
		m.Steps[i].Result = r.redactMemoized(m.Steps[i].Result)
	}
	m.Files = slices.Clone(m.Files)
	for i := range m.Files {
		m.Files[i] = r.redactMemoized(m.Files[i])
	}
	return m
}
