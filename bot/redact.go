package bot

import (
	"slices"
	"strings"

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
	rules []*rule
	// keywords are every rule's keywords once; ruleKeys[i] indexes rule i's.
	keywords []string
	ruleKeys [][]int
	trie     *ahocorasick.Trie
	// values are the configured secrets and their encoded forms, longest first, so a value
	// that contains another is removed whole.
	values []string
}

// NewRedactor returns a Redactor for the built-in rules plus values. Values shorter than
// four characters, and values "[redacted]" itself contains, are ignored.
func NewRedactor(values []string) *Redactor {
	rs, err := rules()
	if err != nil {
		// The rules are compiled into the binary: a failure is a bug that every test shows.
		panic(err)
	}
	r := &Redactor{rules: rs}
	index := map[string]int{}
	for _, ru := range rs {
		var ks []int
		for _, k := range ru.keywords {
			i, ok := index[k]
			if !ok {
				i = len(r.keywords)
				index[k] = i
				r.keywords = append(r.keywords, k)
			}
			ks = append(ks, i)
		}
		r.ruleKeys = append(r.ruleKeys, ks)
	}
	r.trie = ahocorasick.NewTrieBuilder().AddStrings(r.keywords).Build()
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
	// One Aho-Corasick pass finds which keywords occur, as gitleaks's own prefilter does.
	present := make([]bool, len(r.keywords))
	r.trie.Walk(asciiLower(text), func(_, _, k int64) bool {
		present[k] = true
		return true
	})
	for i, ru := range r.rules {
		if r.gate(i, present) {
			spans = ru.find(spans, text)
		}
	}
	return spans
}

// gate reports whether rule i may match a text holding the present keywords.
func (r *Redactor) gate(i int, present []bool) bool {
	if len(r.ruleKeys[i]) == 0 {
		return true
	}
	for _, k := range r.ruleKeys[i] {
		if present[k] {
			return true
		}
	}
	return false
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
	m.Title = r.Redact(m.Title)
	m.Text = r.Redact(m.Text)
	m.Footer = r.Redact(m.Footer)
	m.Plan = slices.Clone(m.Plan)
	for i := range m.Plan {
		m.Plan[i].Text = r.Redact(m.Plan[i].Text)
	}
	m.Fields = slices.Clone(m.Fields)
	for i := range m.Fields {
		m.Fields[i].Name = r.Redact(m.Fields[i].Name)
		m.Fields[i].Value = r.Redact(m.Fields[i].Value)
	}
	m.Buttons = slices.Clone(m.Buttons)
	for i := range m.Buttons {
		m.Buttons[i].Label = r.Redact(m.Buttons[i].Label)
		m.Buttons[i].Confirm = r.Redact(m.Buttons[i].Confirm)
	}
	return m
}
