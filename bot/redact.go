package bot

import (
	"regexp"
	"slices"
	"strings"
)

// redacted replaces every secret the Redactor finds.
const redacted = "[redacted]"

// minSecretLen is the shortest configured value that is redacted: a shorter one would blank
// out ordinary words and numbers everywhere, and is not a credential anyway.
const minSecretLen = 4

// secretPatterns are the shapes of well-known credentials. Where a pattern has a group, the
// group is a label that stays ("Bearer [redacted]"), and a second group is what follows the
// secret and stays too; otherwise the whole match goes.
var secretPatterns = []*regexp.Regexp{
	// Private key blocks, also one cut off before its END line.
	regexp.MustCompile(`(?s)-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\z)`),
	// Slack bot, user and app-level tokens.
	regexp.MustCompile(`xox[abposre]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`xapp-[0-9]+-[A-Za-z0-9-]{10,}`),
	// OpenAI and other "sk-" API keys, project and service-account keys included.
	regexp.MustCompile(`sk-[A-Za-z0-9_-]{20,}`),
	// GitHub tokens: classic (ghp_, gho_, ghu_, ghs_, ghr_) and fine-grained.
	regexp.MustCompile(`gh[pousr]_[A-Za-z0-9]{30,}`),
	regexp.MustCompile(`github_pat_[A-Za-z0-9_]{22,}`),
	// AWS access key IDs.
	regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),
	// AWS secret access keys after their name, as ~/.aws/credentials writes it.
	regexp.MustCompile(`(?i)(aws_secret_access_key["']?\s*[=:]\s*["']?)[A-Za-z0-9/+=]{40}`),
	// Values of environment variables named as secrets, as .env files and env print them:
	// DB_PASSWORD=..., AWS_SECRET_ACCESS_KEY=..., STRIPE_API_KEY=....
	regexp.MustCompile(`\b((?:[A-Z0-9]+_)*(?:SECRET|PASSWORD|PASSWD|TOKEN|API_KEY|APIKEY|ACCESS_KEY|PRIVATE_KEY)(?:_[A-Z0-9]+)*["']?\s*[=:]\s*["']?)[^\s"']{8,}`),
	// Passwords in URLs: scheme://user:password@host.
	regexp.MustCompile(`(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:)[^\s@/]+(@)`),
	// JSON web tokens.
	regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`),
	// Discord bot tokens: base64 user ID, timestamp and HMAC, dot-separated.
	regexp.MustCompile(`\b[A-Za-z0-9_-]{23,28}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}\b`),
	// Bearer tokens in headers or logs.
	regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}`),
}

// Redactor removes secrets from text before it is posted: well-known token formats and the
// configured values. It is safe for concurrent use.
type Redactor struct {
	values []string
}

// NewRedactor returns a Redactor for the built-in token patterns plus values. Values shorter
// than four characters are ignored.
func NewRedactor(values []string) *Redactor {
	var vs []string
	for _, v := range values {
		if v = strings.TrimSpace(v); len(v) >= minSecretLen {
			vs = append(vs, v)
		}
	}
	// Longest first, so a value that contains another is removed whole.
	slices.SortFunc(vs, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{values: slices.Compact(vs)}
}

// Redact returns s with every secret replaced by "[redacted]".
func (r *Redactor) Redact(s string) string {
	// Configured values go first: a pattern matching part of one would leave the rest.
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, redacted)
	}
	for _, re := range secretPatterns {
		switch re.NumSubexp() {
		case 0:
			s = re.ReplaceAllLiteralString(s, redacted)
		case 1:
			s = re.ReplaceAllString(s, "${1}"+redacted)
		default:
			s = re.ReplaceAllString(s, "${1}"+redacted+"${2}")
		}
	}
	return s
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
